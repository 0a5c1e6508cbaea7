#ifndef CSESAME_EPOLL_H
#define CSESAME_EPOLL_H

// Linux C for SesameLoopback: epoll(7) for its event loop (Swift's Glibc module does not bring <sys/epoll.h>),
// accept4(2) and pipe2(2) for descriptors close-on-exec from their creation, and posix_spawn(3) with every inherited
// descriptor closed (accept4 and posix_spawn's GNU extensions need _GNU_SOURCE, which Swift's Glibc module is not
// built with).

/// Watch for reading.
#define CSESAME_EPOLL_READ 1u
/// Watch for writing.
#define CSESAME_EPOLL_WRITE 2u
/// Reported: an error or a hang-up.
#define CSESAME_EPOLL_FAILED 4u
/// Watch: report one event, then nothing until watched again (EPOLLONESHOT).
#define CSESAME_EPOLL_ONESHOT 8u

/// A new epoll instance (close-on-exec), or -1.
int csesame_epoll_create(void);

/// accept4(2) with SOCK_CLOEXEC: the connection, or -1 with errno set.
int csesame_accept(int listener);

/// pipe2(2) with O_CLOEXEC into `ends`: 0, or -1 with errno set.
int csesame_pipe(int ends[2]);

/// Adds (`add` 1) or changes (`add` 0) what `fd` is watched for: CSESAME_EPOLL_READ | CSESAME_EPOLL_WRITE.
int csesame_epoll_watch(int epoll, int fd, unsigned events, int add);

/// Stops watching `fd`.
int csesame_epoll_forget(int epoll, int fd);

/// Waits up to `timeout` ms; fills `fds` and `events` (CSESAME_EPOLL_* bits) with up to `capacity` entries and
/// returns how many (0 on timeout or interruption).
int csesame_epoll_wait(int epoll, int *fds, unsigned *events, int capacity, int timeout);

/// Starts `path` with `argv` and `envp` (both NULL-terminated; `envp` NULL: this process's environment), its
/// standard input, output and error on `stdio[0]`, `stdio[1]`, `stdio[2]` (-1: this process's), in `directory`
/// (NULL: this process's), with every other descriptor closed and every signal unblocked and at its default.
/// Returns 0 and sets `*pid`, or an errno value. posix_spawn(3) where the C library can close descriptors in the
/// child (glibc 2.34 and later), csesame_spawn_fork elsewhere.
int csesame_spawn(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                  const char *directory, int *pid);

/// csesame_spawn by fork(2) and execve(2), for C libraries without posix_spawn_file_actions_addclosefrom_np (musl,
/// Android's, glibc before 2.34); exec's errno comes back through a close-on-exec pipe.
int csesame_spawn_fork(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                       const char *directory, int *pid);

/// Waits for child `pid` to end without reaping it, so its process ID cannot be reused until csesame_spawn_reap;
/// sets `*exit_code` (-1 when killed) and `*signal_number` (0 when it exited). Returns 0 or an errno value.
int csesame_spawn_wait(int pid, int *exit_code, int *signal_number);

/// Reaps child `pid` once csesame_spawn_wait has returned.
void csesame_spawn_reap(int pid);

/// csesame_spawn_fork with its way of closing descriptors chosen (tests): 0 the best there is (close_range(2), then
/// a listing of /proc/self/fd, then one close(2) per number up to the open-file limit), 1 from the listing on, 2 one
/// close per number only.
int csesame_spawn_fork_closing(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                               const char *directory, int *pid, int closing);

/// A pidfd (close-on-exec) for child `pid`, taken right after it started; -1 where the kernel (before 5.3) or its
/// headers have none. With one, a signal reaches that very process even once the kernel reaped it itself (SIGCHLD
/// ignored) and its ID was reused.
int csesame_spawn_pidfd(int pid);

/// Sends `signal_number` through `pidfd` when it is one (>= 0), with kill(2) otherwise. Returns 0 or an errno value.
int csesame_spawn_signal(int pid, int pidfd, int signal_number);

#endif
