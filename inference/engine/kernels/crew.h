// Part of cpu_kernels.cc, the kernels' one translation unit (included from there only, in order):
// the kernels' own threads and how a call's parts are spread over them.

#pragma once

namespace {

// Threads of our own that run parts of one call beside its caller: they spin a while after each call
// (the next matmul of a step comes microseconds later) and then sleep until woken. XLA's intra-op pool
// also served here, but its idle workers keep spinning to steal work: on two cores a matmul's two parts
// then shared them with a third thread that did nothing (AMD Zen 3, SmolLM2 at one row: a tenth of
// the samples in the pool's steal loop). One call at a time holds the crew; a call that finds it held
// (another device's program, another model's step) goes to XLA's pool (parallel_parts).
class Crew {
 public:
  // job(part) for every part in [0, parts), on the caller and on up to parts - 1 crew threads; false
  // (nothing run) when another call holds the crew.
  template <typename Job>
  bool run(int64_t parts, Job& job) {
    std::unique_lock<std::mutex> hold(busy_, std::try_to_lock);
    if (!hold.owns_lock()) return false;
    while (static_cast<int64_t>(threads_) < parts - 1) {
      std::thread(&Crew::loop, this).detach();
      ++threads_;
    }
    call_ = [](void* context, int64_t part) { (*static_cast<Job*>(context))(part); };
    context_ = &job;
    parts_ = parts;
    next_.store(0);
    done_.store(0);
    open_.store(true);
    {
      std::lock_guard<std::mutex> lock(sleep_);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    claim();
    for (int64_t spins = 0; done_.load() < parts; ++spins) pause(spins);
    open_.store(false);
    for (int64_t spins = 0; active_.load() > 0; ++spins) pause(spins);  // nobody still reads this job
    return true;
  }

 private:
  // A short wait spins; a long one (a crew thread descheduled mid-part) gives its core away.
  static void pause(int64_t spins) {
#if defined(__x86_64__)
    if (spins < 4096) return _mm_pause();
#endif
    std::this_thread::yield();
  }

  void claim() {
    for (int64_t part; (part = next_.fetch_add(1)) < parts_;) {
      call_(context_, part);
      done_.fetch_add(1);
    }
  }

  void loop() {
    uint64_t seen = generation_.load();
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t spins = 0; generation_.load() == seen; ++spins) {
        if ((spins & 255) == 0 && std::chrono::steady_clock::now() - start > kSpin) {
          std::unique_lock<std::mutex> lock(sleep_);
          wake_.wait(lock, [&] { return generation_.load() != seen; });
          break;
        }
        pause(0);  // bounded by kSpin, not by the count
      }
      seen = generation_.load();
      active_.fetch_add(1);
      if (open_.load() && generation_.load() == seen) claim();
      active_.fetch_sub(1);
    }
  }

  static constexpr std::chrono::microseconds kSpin{200};
  std::mutex busy_, sleep_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0}, done_{0}, active_{0};
  std::atomic<bool> open_{false};
  void (*call_)(void*, int64_t) = nullptr;
  void* context_ = nullptr;
  int64_t parts_ = 0;
  size_t threads_ = 0;
};

Crew& crew() {
  static Crew* one = new Crew;  // never destroyed: its threads outlive any static destructor order
  return *one;
}

// Runs body(part) for every part in [0, parts): on the calling thread and on parts - 1 tasks scheduled
// on XLA's intra-op pool. Every runner claims parts until none is left, so a pool that is busy (or runs
// tasks on the caller) delays a call but never deadlocks it; the caller then waits only for parts
// already being run. A task that starts after the call returned finds nothing to claim.
template <typename Body>
void pool_parts(ffi::ThreadPool& pool, int64_t parts, Body body) {
  struct State {
    Body body;
    int64_t parts;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    State(Body b, int64_t n) : body(std::move(b)), parts(n) {}
    void work() {
      for (int64_t part; (part = next.fetch_add(1, std::memory_order_relaxed)) < parts;) {
        body(part);
        done.fetch_add(1, std::memory_order_release);
      }
    }
  };
  auto state = std::make_shared<State>(std::move(body), parts);
  for (int64_t i = 1; i < parts; ++i) pool.Schedule([state] { state->work(); });
  state->work();
  while (state->done.load(std::memory_order_acquire) < parts) std::this_thread::yield();
}

// Runs body(part) for every part in [0, parts): a decode step's call (``step``) on the calling thread
// and the crew, else (a prefill, or another call holds the crew: several models stepping at once on a
// many-core machine) on XLA's pool as before. A prefill's XLA operations are big enough for XLA to run
// them on its pool too, where a crew thread spinning beside them cost SmolLM2's 100-token prefill 1.2x.
template <typename Body>
void parallel_parts(ffi::ThreadPool& pool, int64_t parts, bool step, Body body) {
  if (parts <= 1) {
    if (parts == 1) body(0);
  } else if (!step || !crew().run(parts, body)) {
    pool_parts(pool, parts, std::move(body));
  }
}

// body(n0, n1) for consecutive runs of outputs, whole multiples of ``unit``, one per thread (one in all
// below ~64k multiply-adds, where a second thread costs more to wake than it saves). The caller's
// frame outlives every part that runs (parallel_parts), so body may capture it by reference.
template <typename Body>
void over_outputs(ffi::ThreadPool& pool, const Problem& problem, int64_t unit, Body body) {
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const bool tiny = problem.m * problem.n * problem.k < (int64_t{1} << 16);
  const int64_t units = (problem.n + unit - 1) / unit;
  const int64_t parts = std::min<int64_t>(tiny ? 1 : threads, units);
  parallel_parts(pool, parts, problem.m <= kSmallRows, [&problem, &body, unit, units, parts](int64_t part) {
    const int64_t n0 = std::min(problem.n, units * part / parts * unit);
    const int64_t n1 = std::min(problem.n, units * (part + 1) / parts * unit);
    if (n0 < n1) body(n0, n1);
  });
}

}  // namespace
