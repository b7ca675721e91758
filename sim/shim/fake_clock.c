/*
 * fake_clock: shifts a server's wall clock by an offset the chaos
 * controller changes while the server runs, for the server clock faults
 * (`clock-jump` and `clock-drift` on a Redis node).
 *
 * Preloaded into redis-server (or valkey-server) with LD_PRELOAD, it reads
 * the offset from the file LOCK_SIM_CLOCK_FILE names, mapped into memory
 * once at load: every reading of the wall clock (gettimeofday, time, and
 * clock_gettime of CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_TAI)
 * returns the real reading plus the offset of that moment, so a change the
 * controller writes shows at the server's next reading, with no file read
 * on the way. The monotonic clocks pass through untouched: the simulator's
 * server clock is the wall clock that key expiry and TIME read, and its
 * timers run on true time, as Redis's event loop runs on the monotonic
 * clock.
 *
 * libfaketime does the same in general, but hangs a server linked with
 * jemalloc (Debian's Redis 7.0) at start: jemalloc reads the clock while it
 * initialises, and libfaketime's first clock call allocates. This library
 * never allocates, and reads a clock with a raw system call until the
 * dynamic linker has handed it libc's functions.
 *
 * The file holds two native 64-bit integers: the offset in nanoseconds,
 * then its bitwise complement. The controller rewrites both in one write; a
 * reading that finds them disagreeing met that write half done, and reads
 * again (after a few misses, it keeps the last offset it read whole).
 *
 * Written for this project (sim/build.rs builds it; the chaos mode writes it
 * next to a run's logs and preloads it into the nodes of a run whose
 * schedule has a server clock fault).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL

struct shift {
    int64_t offset_ns;
    int64_t check;
};

static const struct shift *shift;
static int64_t last_whole;

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_gettimeofday)(struct timeval *, void *);

__attribute__((constructor)) static void map_shift(void) {
    real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    real_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
    const char *path = getenv("LOCK_SIM_CLOCK_FILE");
    if (path == NULL) {
        return;
    }
    /* Raw calls: another preloaded library may wrap open and close. */
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    void *at = mmap(NULL, sizeof(struct shift), PROT_READ, MAP_SHARED, (int)fd, 0);
    syscall(SYS_close, fd);
    if (at != MAP_FAILED) {
        shift = at;
    }
}

static int64_t offset_ns(void) {
    if (shift == NULL) {
        return 0;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        int64_t offset = __atomic_load_n(&shift->offset_ns, __ATOMIC_ACQUIRE);
        int64_t check = __atomic_load_n(&shift->check, __ATOMIC_ACQUIRE);
        if (check == ~offset) {
            __atomic_store_n(&last_whole, offset, __ATOMIC_RELAXED);
            return offset;
        }
    }
    return __atomic_load_n(&last_whole, __ATOMIC_RELAXED);
}

static int is_wall_clock(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

static void shift_timespec(struct timespec *ts) {
    int64_t ns = (int64_t)ts->tv_sec * NS_PER_S + ts->tv_nsec + offset_ns();
    int64_t sec = ns / NS_PER_S;
    int64_t rest = ns % NS_PER_S;
    if (rest < 0) {
        rest += NS_PER_S;
        sec -= 1;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rest;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int result = real_clock_gettime != NULL ? real_clock_gettime(id, ts)
                                            : (int)syscall(SYS_clock_gettime, id, ts);
    if (result == 0 && is_wall_clock(id)) {
        shift_timespec(ts);
    }
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    int result = real_gettimeofday != NULL ? real_gettimeofday(tv, tz)
                                           : (int)syscall(SYS_gettimeofday, tv, tz);
    if (result == 0) {
        struct timespec ts = {.tv_sec = tv->tv_sec, .tv_nsec = (long)tv->tv_usec * 1000};
        shift_timespec(&ts);
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
