// accept4(2) and pipe2(2) are declared only with _GNU_SOURCE.
#define _GNU_SOURCE
#include "csesame_epoll.h"

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int csesame_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int csesame_accept(int listener) { return accept4(listener, NULL, NULL, SOCK_CLOEXEC); }

int csesame_pipe(int ends[2]) { return pipe2(ends, O_CLOEXEC); }

int csesame_epoll_watch(int epoll, int fd, unsigned events, int add) {
    struct epoll_event event = {0};
    event.events = ((events & CSESAME_EPOLL_READ) ? EPOLLIN : 0) | ((events & CSESAME_EPOLL_WRITE) ? EPOLLOUT : 0)
                   | ((events & CSESAME_EPOLL_ONESHOT) ? EPOLLONESHOT : 0);
    event.data.fd = fd;
    return epoll_ctl(epoll, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
}

int csesame_epoll_forget(int epoll, int fd) {
    struct epoll_event unused = {0};
    return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &unused);
}

int csesame_epoll_wait(int epoll, int *fds, unsigned *events, int capacity, int timeout) {
    struct epoll_event ready[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epoll, ready, capacity, timeout);
    if (count < 0) return 0;
    for (int i = 0; i < count; i++) {
        unsigned flags = 0;
        if (ready[i].events & EPOLLIN) flags |= CSESAME_EPOLL_READ;
        if (ready[i].events & EPOLLOUT) flags |= CSESAME_EPOLL_WRITE;
        if (ready[i].events & (EPOLLERR | EPOLLHUP)) flags |= CSESAME_EPOLL_FAILED;
        fds[i] = ready[i].data.fd;
        events[i] = flags;
    }
    return count;
}
#endif
