// posix_spawn's GNU extensions (addchdir_np, addclosefrom_np) are declared only with _GNU_SOURCE.
#define _GNU_SOURCE
#include "csesame_epoll.h"

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <spawn.h>
#include <string.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define CSESAME_SPAWN_CAN_CLOSE 1
#endif

/// Copies each standard-stream source below 3 to a close-on-exec descriptor from 3 up, so that setting up fd 0 in the
/// child cannot overwrite the source of fd 1 or 2 (a source of 1 for stderr, or /dev/null opened as fd 0 when this
/// process started with stdin closed). `moved` gets the copies to close afterwards (-1: none).
static int csesame_lift_sources(const int stdio[3], int sources[3], int moved[3]) {
    for (int target = 0; target < 3; target++) {
        sources[target] = stdio[target];
        moved[target] = -1;
        if (stdio[target] >= 0 && stdio[target] < 3) {
            int copy = fcntl(stdio[target], F_DUPFD_CLOEXEC, 3);
            if (copy < 0) {
                int error = errno;
                for (int done = 0; done < target; done++) {
                    if (moved[done] >= 0) close(moved[done]);
                }
                return error;
            }
            sources[target] = moved[target] = copy;
        }
    }
    return 0;
}

static void csesame_close_moved(const int moved[3]) {
    for (int target = 0; target < 3; target++) {
        if (moved[target] >= 0) close(moved[target]);
    }
}

int csesame_spawn(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                  const char *directory, int *pid) {
#ifndef CSESAME_SPAWN_CAN_CLOSE
    return csesame_spawn_fork(path, argv, envp, stdio, directory, pid);
#else
    int sources[3], moved[3];
    int status = csesame_lift_sources(stdio, sources, moved);
    if (status != 0) return status;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    status = posix_spawn_file_actions_init(&actions);
    if (status != 0) {
        csesame_close_moved(moved);
        return status;
    }
    status = posix_spawnattr_init(&attributes);
    if (status != 0) {
        posix_spawn_file_actions_destroy(&actions);
        csesame_close_moved(moved);
        return status;
    }
    // The standard streams first, then everything from 3 up closed: the sources of those dup2s included.
    for (int target = 0; target < 3 && status == 0; target++) {
        if (sources[target] >= 0) status = posix_spawn_file_actions_adddup2(&actions, sources[target], target);
    }
    if (status == 0 && directory != NULL) status = posix_spawn_file_actions_addchdir_np(&actions, directory);
    if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // Signals: none blocked, every one at its default (this process may ignore SIGPIPE; exec would keep that).
    sigset_t signals;
    if (status == 0) {
        sigfillset(&signals);
        status = posix_spawnattr_setsigdefault(&attributes, &signals);
    }
    if (status == 0) {
        sigemptyset(&signals);
        status = posix_spawnattr_setsigmask(&attributes, &signals);
    }
    if (status == 0) status = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (status == 0) {
        pid_t child = 0;
        status = posix_spawn(&child, path, &actions, &attributes, argv, envp != NULL ? envp : environ);
        if (status == 0) *pid = child;
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    csesame_close_moved(moved);
    return status;
#endif
}

#ifdef SYS_getdents64
/// In a forked child: closes every descriptor from 3 up but `keep`, as listed by /proc/self/fd (read with
/// getdents64(2): no allocation, async-signal-safe), listing again after each pass that closed something, so that
/// nothing is skipped while the directory changes. Returns 0, or -1 when /proc cannot be read.
static int csesame_close_listed(int keep) {
    int directory = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) return -1;
    int closed_some = 1;
    while (closed_some) {
        closed_some = 0;
        if (lseek(directory, 0, SEEK_SET) != 0) break;
        _Alignas(8) char buffer[4096];
        long got;
        while ((got = syscall(SYS_getdents64, directory, buffer, sizeof buffer)) > 0) {
            for (long offset = 0; offset < got;) {
                // struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name.
                unsigned short length;
                memcpy(&length, buffer + offset + 16, sizeof length);
                const char *name = buffer + offset + 19;
                long number = 0;
                int digits = *name != 0;
                for (const char *c = name; *c != 0; c++) {
                    if (*c < '0' || *c > '9' || number > 1L << 30) { digits = 0; break; }
                    number = number * 10 + (*c - '0');
                }
                if (digits && number >= 3 && number != keep && number != directory) {
                    (void)close((int)number);
                    closed_some = 1;
                }
                if (length == 0) break;
                offset += length;
            }
        }
        if (got < 0) {
            close(directory);
            return -1;
        }
    }
    close(directory);
    return 0;
}
#endif

int csesame_spawn_fork(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                       const char *directory, int *pid) {
    return csesame_spawn_fork_closing(path, argv, envp, stdio, directory, pid, 0);
}

int csesame_spawn_fork_closing(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                               const char *directory, int *pid, int closing) {
    int sources[3], moved[3];
    int status = csesame_lift_sources(stdio, sources, moved);
    if (status != 0) return status;
    // exec's failure comes back through a close-on-exec pipe: nothing read means the exec happened.
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        status = errno;
        csesame_close_moved(moved);
        return status;
    }
    // From 3 up, like the sources, so that the child's dup2s cannot land on it.
    for (int end = 0; end < 2; end++) {
        if (report[end] < 3 && status == 0) {
            int copy = fcntl(report[end], F_DUPFD_CLOEXEC, 3);
            status = copy < 0 ? errno : 0;
            close(report[end]);
            report[end] = copy;
        }
    }
    if (status != 0) {
        for (int end = 0; end < 2; end++) {
            if (report[end] >= 0) close(report[end]);
        }
        csesame_close_moved(moved);
        return status;
    }
    // The highest descriptor to close where close_range(2) is missing (Linux before 5.9).
    struct rlimit limit;
    long highest = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? (long)limit.rlim_cur : 65536;
    char *const *environment = envp != NULL ? envp : environ;
    // Every signal blocked across fork, so that none runs one of this process's handlers in the child before it has
    // set them all to their default; the parent's mask comes back after.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t child = fork();
    if (child == 0) {
        // Only async-signal-safe calls from here: this process may have had other threads.
        int failure = 0;
        for (int target = 0; target < 3 && failure == 0; target++) {
            if (sources[target] >= 0 && dup2(sources[target], target) < 0) failure = errno;
        }
        if (failure == 0 && directory != NULL && chdir(directory) != 0) failure = errno;
        if (failure == 0) {
            struct sigaction action = {0};
            action.sa_handler = SIG_DFL;
            for (int signal = 1; signal < NSIG; signal++) (void)sigaction(signal, &action, NULL);
            sigset_t none;
            sigemptyset(&none);
            (void)sigprocmask(SIG_SETMASK, &none, NULL);
            int keep = report[1];
            // Everything from 3 up but the report pipe, which exec closes by itself: close_range(2) where the
            // kernel (5.9) and its headers have it, else those /proc/self/fd lists, else one close(2) per number
            // up to the open-file limit. `closing` (tests) starts further down that list.
            int ranged = 0;
#ifdef SYS_close_range
            ranged = closing == 0 && (keep == 3 || syscall(SYS_close_range, 3u, (unsigned)(keep - 1), 0u) == 0)
                     && syscall(SYS_close_range, (unsigned)(keep + 1), ~0u, 0u) == 0;
#endif
#ifdef SYS_getdents64
            if (!ranged && closing <= 1) ranged = csesame_close_listed(keep) == 0;
#endif
            if (!ranged) {
                for (long fd = 3; fd < highest; fd++) {
                    if (fd != keep) (void)close((int)fd);
                }
            }
            execve(path, argv, environment);
            failure = errno;
        }
        (void)!write(report[1], &failure, sizeof failure);
        _exit(127);
    }
    status = child < 0 ? errno : 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    close(report[1]);
    csesame_close_moved(moved);
    if (status == 0) {
        int failure = 0;
        ssize_t got;
        do { got = read(report[0], &failure, sizeof failure); } while (got < 0 && errno == EINTR);
        if (got == (ssize_t)sizeof failure) {
            int ignored;
            while (waitpid(child, &ignored, 0) < 0 && errno == EINTR) {}
            status = failure != 0 ? failure : EIO;
        } else {
            *pid = child;
        }
    }
    close(report[0]);
    return status;
}

int csesame_spawn_wait(int pid, int *exit_code, int *signal_number) {
    siginfo_t info = {0};
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0) {
        if (errno != EINTR) return errno;
    }
    int exited = info.si_code == CLD_EXITED;
    *exit_code = exited ? info.si_status : -1;
    *signal_number = exited ? 0 : info.si_status;
    return 0;
}

void csesame_spawn_reap(int pid) {
    int ignored;
    while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {}
}

int csesame_spawn_pidfd(int pid) {
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);  // pidfd_open sets it; said for older headers' kernels
    return fd;
#else
    (void)pid;
    return -1;
#endif
}

int csesame_spawn_signal(int pid, int pidfd, int signal_number) {
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0) return syscall(SYS_pidfd_send_signal, pidfd, signal_number, NULL, 0) == 0 ? 0 : errno;
#else
    (void)pidfd;
#endif
    return kill(pid, signal_number) == 0 ? 0 : errno;
}
#endif
