// posix_spawn's GNU extensions (addchdir_np, addclosefrom_np) are declared only with _GNU_SOURCE.
#define _GNU_SOURCE
#include "csesame_epoll.h"

#ifdef __linux__
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define CSESAME_SPAWN_CAN_CLOSE 1
#endif

int csesame_spawn(const char *path, char *const argv[], char *const envp[], const int stdio[3],
                  const char *directory, int *pid) {
#ifndef CSESAME_SPAWN_CAN_CLOSE
    (void)path, (void)argv, (void)envp, (void)stdio, (void)directory, (void)pid;
    return ENOSYS;
#else
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int status = posix_spawn_file_actions_init(&actions);
    if (status != 0) return status;
    status = posix_spawnattr_init(&attributes);
    if (status != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return status;
    }
    // The standard streams first, then everything from 3 up closed: the sources of those dup2s included.
    for (int target = 0; target < 3 && status == 0; target++) {
        if (stdio[target] >= 0) status = posix_spawn_file_actions_adddup2(&actions, stdio[target], target);
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
    return status;
#endif
}

int csesame_spawn_wait(int pid, int *exit_code, int *signal_number) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return errno;
    }
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    *signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return 0;
}
#endif
