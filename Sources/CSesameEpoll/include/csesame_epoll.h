#ifndef CSESAME_EPOLL_H
#define CSESAME_EPOLL_H

// epoll(7) for SesameLoopback's event loop on Linux (Swift's Glibc module does not bring <sys/epoll.h>).

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

/// Adds (`add` 1) or changes (`add` 0) what `fd` is watched for: CSESAME_EPOLL_READ | CSESAME_EPOLL_WRITE.
int csesame_epoll_watch(int epoll, int fd, unsigned events, int add);

/// Stops watching `fd`.
int csesame_epoll_forget(int epoll, int fd);

/// Waits up to `timeout` ms; fills `fds` and `events` (CSESAME_EPOLL_* bits) with up to `capacity` entries and
/// returns how many (0 on timeout or interruption).
int csesame_epoll_wait(int epoll, int *fds, unsigned *events, int capacity, int timeout);

#endif
