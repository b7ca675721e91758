/*
 * lazy_aof: makes a `kill -9` of redis-server (or valkey-server) lose what a
 * machine crash would lose, for the chaos mode's restart faults.
 *
 * A killed process's writes are already in the OS page cache and survive,
 * fsynced or not, so a `kill -9` alone cannot show what `appendfsync
 * everysec` risks. Preloaded into the server (LD_PRELOAD), this library
 * holds every write() to an append-only file (a name ending in
 * ".incr.aof", Redis 7's and Valkey's multi-part AOF; or "appendonly.aof")
 * in the process's own memory until that file is fsync()ed or
 * fdatasync()ed (or closed, or the process exits normally): a kill loses
 * exactly the writes since the file's last fsync, as a power loss does
 * with a disk that honours fsync. Every other file is passed through.
 *
 * The server sees every write succeed in full, as it would with the page
 * cache; the fsync that follows (Redis's background thread once a second
 * with `everysec`, the main thread after each write with `always`) writes
 * the held bytes out, then syncs them, so a fsync still means durable.
 *
 * Written for this project (sim/build.rs builds it; the chaos mode writes
 * it next to a run's logs and preloads it into AOF-persisting servers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 4096

struct held {
    int tracked;
    char *bytes;
    size_t len;
    size_t cap;
};

static struct held files[MAX_FDS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);

__attribute__((constructor)) static void resolve(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_close = dlsym(RTLD_NEXT, "close");
}

static int ends_with(const char *text, const char *suffix) {
    size_t n = strlen(text), m = strlen(suffix);
    return n >= m && strcmp(text + n - m, suffix) == 0;
}

static int is_aof(const char *path) {
    return path != NULL && (ends_with(path, ".incr.aof") || ends_with(path, "appendonly.aof"));
}

static void track(int fd, const char *path) {
    if (fd < 0 || fd >= MAX_FDS || !is_aof(path)) {
        return;
    }
    pthread_mutex_lock(&lock);
    files[fd].tracked = 1;
    files[fd].len = 0;
    pthread_mutex_unlock(&lock);
}

/* Writes out what `fd` holds; the caller holds `lock`. Returns 0, or -1
 * with errno set by the failing write (what is left stays held). */
static int flush_locked(int fd) {
    struct held *file = &files[fd];
    size_t done = 0;
    while (done < file->len) {
        ssize_t n = real_write(fd, file->bytes + done, file->len - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            memmove(file->bytes, file->bytes + done, file->len - done);
            file->len -= done;
            return -1;
        }
        done += (size_t)n;
    }
    file->len = 0;
    return 0;
}

static int flush(int fd) {
    if (fd < 0 || fd >= MAX_FDS) {
        return 0;
    }
    pthread_mutex_lock(&lock);
    int result = files[fd].tracked ? flush_locked(fd) : 0;
    pthread_mutex_unlock(&lock);
    return result;
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (fd >= 0 && fd < MAX_FDS) {
        pthread_mutex_lock(&lock);
        struct held *file = &files[fd];
        if (file->tracked) {
            if (file->len + count > file->cap) {
                size_t cap = file->cap ? file->cap : 65536;
                while (cap < file->len + count) {
                    cap *= 2;
                }
                char *grown = realloc(file->bytes, cap);
                if (grown == NULL) {
                    pthread_mutex_unlock(&lock);
                    errno = ENOMEM;
                    return -1;
                }
                file->bytes = grown;
                file->cap = cap;
            }
            memcpy(file->bytes + file->len, buf, count);
            file->len += count;
            pthread_mutex_unlock(&lock);
            return (ssize_t)count;
        }
        pthread_mutex_unlock(&lock);
    }
    return real_write(fd, buf, count);
}

/* open's mode argument is only there with O_CREAT or O_TMPFILE. */
#define MODE_ARG(flags, mode)                                                 \
    do {                                                                      \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                \
            va_list args;                                                     \
            va_start(args, flags);                                            \
            mode = va_arg(args, unsigned int);                                         \
            va_end(args);                                                     \
        }                                                                     \
    } while (0)

int open(const char *path, int flags, ...) {
    unsigned int mode = 0;
    MODE_ARG(flags, mode);
    int fd = real_open(path, flags, mode);
    track(fd, path);
    return fd;
}

int open64(const char *path, int flags, ...) {
    unsigned int mode = 0;
    MODE_ARG(flags, mode);
    int fd = real_open64(path, flags, mode);
    track(fd, path);
    return fd;
}

int openat(int dir, const char *path, int flags, ...) {
    unsigned int mode = 0;
    MODE_ARG(flags, mode);
    int fd = real_openat(dir, path, flags, mode);
    track(fd, path);
    return fd;
}

int openat64(int dir, const char *path, int flags, ...) {
    unsigned int mode = 0;
    MODE_ARG(flags, mode);
    int fd = real_openat64(dir, path, flags, mode);
    track(fd, path);
    return fd;
}

int fsync(int fd) {
    if (flush(fd) != 0) {
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    if (flush(fd) != 0) {
        return -1;
    }
    return real_fdatasync(fd);
}

int close(int fd) {
    if (fd >= 0 && fd < MAX_FDS) {
        pthread_mutex_lock(&lock);
        if (files[fd].tracked) {
            /* A close is not a sync: the bytes reach the page cache, as
             * they would have without this library. */
            flush_locked(fd);
            files[fd].tracked = 0;
            files[fd].len = 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}

/* A normal exit (SHUTDOWN, SIGTERM) loses nothing; a kill runs no
 * destructor, which is the point. */
__attribute__((destructor)) static void flush_all(void) {
    pthread_mutex_lock(&lock);
    for (int fd = 0; fd < MAX_FDS; fd++) {
        if (files[fd].tracked) {
            flush_locked(fd);
        }
    }
    pthread_mutex_unlock(&lock);
}
