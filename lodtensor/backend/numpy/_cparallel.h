/* A small pool of worker threads for the compiled kernels: one parallel call cuts a kernel's work
 * into parts, and the calling thread and the pool's workers take parts until none is left, all
 * without the GIL.
 *
 * Why not the Python thread pool (lodtensor/backend/_threads.py): handing work to it costs a queue,
 * a Future, a wake-up of a sleeping thread and the GIL twice; on the 2-core VM that was about
 * 120 us (relu of 4 MB: 92 us on one thread, 165 us on two), so kernels of a few MB ran on one
 * thread. Here a worker that finished spins for a short while (SPIN_NS) before it sleeps, so
 * back-to-back calls (a model's forward pass, a benchmark loop) start in about a microsecond, as
 * OpenMP's spinning workers do for torch; a sleeping worker is woken by a condition variable.
 * OMP_WAIT_POLICY=passive (which makes torch's OpenMP workers sleep at once) makes these sleep at once.
 *
 * Parts are claimed, not assigned: a worker that is late (asleep, or without a core on a busy
 * machine) finds the parts taken by the caller, who then waits only for parts a worker has begun.
 * So a call is never much slower than the same work on one thread, however busy the machine.
 *
 * How a call is published and claimed. `slot` packs the call's generation (high bits) with the
 * index of the next unclaimed part (low 16 bits). The caller writes fn, ctx and nparts, then
 * publishes slot = (generation, 0); a thread claims part k by a compare-and-swap of (generation, k)
 * to (generation, k + 1), having read fn, ctx and nparts after it read (generation, k). When every
 * part is done the caller closes the call, slot = (generation, CLOSED), before it writes the next
 * call's fn, ctx and nparts: a late thread that read those of the next call then fails its swap,
 * because the slot moved on (all of it sequentially consistent). So a part runs once, with its own
 * call's arguments, and the caller returns only when every part is done.
 *
 * Also:
 * - One call at a time per pool (a mutex tried, never waited on): a second caller (another Python
 *   thread, or a kernel called from a part) runs all its parts itself, in order.
 * - A call of `threads` threads runs on the caller and workers 0..threads-2 only: the pool's other workers
 *   (started by a call that asked for more, before set_num_threads lowered the count) sleep through it.
 * - After fork() the child has none of the workers: its pool is reset (pthread_atfork) and starts
 *   them again on first use. A part never calls Python or takes the GIL.
 * - If a worker cannot be started, fewer run; the caller can always do every part itself.
 */
#ifndef LODTENSOR_CPARALLEL_H
#define LODTENSOR_CPARALLEL_H
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <strings.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define PARALLEL_MAX_WORKERS 63
#define PARALLEL_MAX_PARTS 4096
#define SPIN_NS 200000L /* how long an idle worker spins before it sleeps: 0.2 ms (0 under OMP_WAIT_POLICY=passive) */
#define SLOT_CLOSED 0xffffu

typedef void (*part_fn)(void *ctx, int part, int nparts);

static struct {
    pthread_mutex_t busy;  /* held by the caller for its whole call */
    pthread_mutex_t sleep; /* guards the condition variable's waits */
    pthread_cond_t wake;
    _Atomic uint64_t slot; /* generation << 16 | the next part to claim (or SLOT_CLOSED) */
    atomic_int done;       /* parts finished, of the current call */
    _Atomic uint64_t sleeping; /* bit i: worker i sleeps (or is about to) on `wake` */
    atomic_int allowed;         /* workers 0..allowed-1 may take parts of the current call: threads - 1 */
    _Atomic(part_fn) fn;
    _Atomic(void *) ctx;
    atomic_int nparts;
    uint64_t generation; /* the caller's count of calls (under busy) */
    int started;         /* workers running */
    uint64_t start_generation[PARALLEL_MAX_WORKERS]; /* the generation worker i was started at */
    long spin_ns;        /* SPIN_NS, or 0 when OMP_WAIT_POLICY asks idle threads to sleep (pool_init) */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .sleep = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
          .slot = SLOT_CLOSED};

static long elapsed_ns(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000000000L + (now.tv_nsec - since->tv_nsec);
}

/* Claim and run parts of call `generation` until none is left (or the call is over). */
static void take_parts(uint64_t generation)
{
    for (;;) {
        uint64_t slot = atomic_load(&pool.slot);
        part_fn fn = atomic_load(&pool.fn);
        void *ctx = atomic_load(&pool.ctx);
        int nparts = atomic_load(&pool.nparts);
        unsigned part = (unsigned)(slot & 0xffffu);
        if (slot >> 16 != generation || part >= (unsigned)nparts) return; /* over, or every part taken */
        if (!atomic_compare_exchange_strong(&pool.slot, &slot, slot + 1)) continue;
        fn(ctx, (int)part, nparts); /* (the swap succeeded: fn, ctx and nparts were this call's) */
        atomic_fetch_add(&pool.done, 1);
    }
}

/* Worker `index` (0-based): it takes parts only of calls that allow that many workers (threads - 1 > index),
 * so a call asking for fewer threads than the pool holds runs on that many; the others sleep. */
static void *pool_worker(void *arg)
{
    const int index = (int)(uintptr_t)arg;
    const uint64_t bit = (uint64_t)1 << index;
    uint64_t seen = pool.start_generation[index], now = seen; /* (written before pthread_create) */
    int spin = 1;
    for (;;) {
        if (spin) {
            struct timespec since;
            clock_gettime(CLOCK_MONOTONIC, &since);
            for (unsigned spins = 1;; spins++) { /* spin a while: the next call often comes at once */
                now = atomic_load(&pool.slot) >> 16;
                if (now != seen || ((spins & 255) == 0 && elapsed_ns(&since) >= pool.spin_ns)) break;
                CPU_RELAX();
            }
        }
        if (now == seen) { /* then sleep until the next call (its bit and slot: seq_cst on both sides) */
            pthread_mutex_lock(&pool.sleep);
            atomic_fetch_or(&pool.sleeping, bit);
            while ((now = atomic_load(&pool.slot) >> 16) == seen) pthread_cond_wait(&pool.wake, &pool.sleep);
            atomic_fetch_and(&pool.sleeping, ~bit);
            pthread_mutex_unlock(&pool.sleep);
        }
        seen = now;
        /* allowed is written before the slot; a later call's value at worst makes it skip or join a call
         * whose parts the swap then refuses it */
        spin = index < atomic_load(&pool.allowed);
        if (spin) take_parts(seen);
        else now = seen; /* not wanted in this call: straight back to sleep, no spin */
    }
    return NULL;
}

/* Start workers up to `want`; returns how many run. Called with busy held, before the call is published. */
static int pool_start(int want)
{
    if (want > PARALLEL_MAX_WORKERS) want = PARALLEL_MAX_WORKERS;
    while (pool.started < want) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pool.start_generation[pool.started] = pool.generation;
        int failed = pthread_create(&thread, &attr, pool_worker, (void *)(uintptr_t)pool.started);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.started++;
    }
    return pool.started;
}

/* fn(ctx, part, nparts) for every part 0..nparts-1 (at most PARALLEL_MAX_PARTS), by this thread and up to
 * `threads - 1` workers; returns when all are done. Call without the GIL. */
static void parallel_run(part_fn fn, void *ctx, int nparts, int threads)
{
    if (nparts > PARALLEL_MAX_PARTS) nparts = PARALLEL_MAX_PARTS; /* (callers cut at most so many) */
    if (nparts <= 1 || threads <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        for (int part = 0; part < nparts; part++) fn(ctx, part, nparts);
        return;
    }
    pool_start(threads - 1);
    uint64_t generation = ++pool.generation;
    atomic_store(&pool.done, 0);
    atomic_store(&pool.fn, fn);
    atomic_store(&pool.ctx, ctx);
    atomic_store(&pool.nparts, nparts);
    int allowed = threads - 1 < PARALLEL_MAX_WORKERS ? threads - 1 : PARALLEL_MAX_WORKERS;
    atomic_store(&pool.allowed, allowed);
    atomic_store(&pool.slot, generation << 16); /* published: part 0 is the next to claim */
    /* a worker of this call past its spin: wake it (under the lock: none missed) */
    if (atomic_load(&pool.sleeping) & (((uint64_t)1 << allowed) - 1)) {
        pthread_mutex_lock(&pool.sleep);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.sleep);
    }
    take_parts(generation);
    for (unsigned spins = 0; atomic_load(&pool.done) < nparts; spins++) { /* parts a worker has begun */
        if (spins < 4096) CPU_RELAX();
        else sched_yield(); /* a worker without a core of its own: let it finish */
    }
    atomic_store(&pool.slot, generation << 16 | SLOT_CLOSED);
    pthread_mutex_unlock(&pool.busy);
}

/* In a forked child no worker runs and a lock may be held by a thread that is gone: start afresh. */
static void pool_after_fork_in_child(void)
{
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.sleep, NULL);
    pthread_cond_init(&pool.wake, NULL);
    atomic_store(&pool.sleeping, 0);
    atomic_store(&pool.slot, pool.generation << 16 | SLOT_CLOSED);
    pool.started = 0;
}

/* At import: the spin (idle workers sleep at once where OMP_WAIT_POLICY=passive asks every OpenMP pool of
 * the process to, as torch's does), and the reset of a forked child. */
static int pool_init(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    pool.spin_ns = policy != NULL && strcasecmp(policy, "passive") == 0 ? 0 : SPIN_NS;
    return pthread_atfork(NULL, NULL, pool_after_fork_in_child);
}

#endif
