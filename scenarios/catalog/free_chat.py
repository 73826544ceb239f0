"""Free chat: talk about anything; no API, nothing graded."""

from __future__ import annotations

from scenarios.base import Scenario

FREE_CHAT = Scenario(
    slug="free-chat",
    title="Free chat",
    system_prompt="You are a helpful assistant.",
    description="Talk about anything; corrections and votes are yours alone (no grader).",
)
