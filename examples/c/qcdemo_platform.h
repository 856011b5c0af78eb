/*
 * qcdemo_platform.h — what differs between the systems qcdemo runs on:
 * Linux and macOS (qcdemo_platform_posix.c) and Windows
 * (qcdemo_platform_win32.c). Each of the two files compiles to nothing on
 * the other kind of system, so a build may simply list both.
 *
 * Covered here: start-up (Windows: UTF-8 arguments, binary stdout), locks
 * and condition variables, the stop signals (POSIX signals; on Windows the
 * console control events, reported as SIGINT / SIGTERM), reading stdin so
 * that a stop signal interrupts the wait, a wake-up object another thread
 * signals (with a timeout), clocks, running a shell command with extra
 * environment variables, and the few file-system calls the demo makes.
 *
 * Strings are UTF-8 everywhere; the Windows side converts to and from
 * UTF-16 at the system calls.
 */
#ifndef QCDEMO_PLATFORM_H
#define QCDEMO_PLATFORM_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

typedef SRWLOCK qcd_mutex;
#define QCD_MUTEX_INIT SRWLOCK_INIT
typedef CONDITION_VARIABLE qcd_cond;
/* Nothing to carry on Windows (see qcd_setup_signals). */
typedef int qcd_sigmask;
typedef struct {
    HANDLE event;
} qcd_wake;
/* The path separator and the suffix of executables. */
#define QCD_DIR_SEP '\\'
#define QCD_EXE_SUFFIX ".exe"
/* Usage texts: what `run COMMAND` runs, a list of folders, the stop signals. */
#define QCD_SHELL_DESC "cmd.exe /d /s /c COMMAND"
#define QCD_PATH_LIST_SEP ';'
#define QCD_DIRS "DIR[;DIR...]"
#define QCD_STOP_SIGNALS "Ctrl+C, Ctrl+Break and closing the console"
#define QCD_TERM_SIGNAL "Ctrl+C"
#else
#include <pthread.h>

typedef pthread_mutex_t qcd_mutex;
#define QCD_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
typedef pthread_cond_t qcd_cond;
/* The signal mask to wait with: the stop signals unblocked. */
typedef sigset_t qcd_sigmask;
typedef struct {
    int fd[2];
} qcd_wake;
#define QCD_DIR_SEP '/'
#define QCD_EXE_SUFFIX ""
#define QCD_SHELL_DESC "/bin/sh -c COMMAND"
#define QCD_PATH_LIST_SEP ':'
#define QCD_DIRS "DIR[:DIR...]"
#define QCD_STOP_SIGNALS "SIGTERM, SIGINT and SIGHUP"
#define QCD_TERM_SIGNAL "SIGTERM"
#endif

/* ---- start-up */

/* Called first in main. Windows: replaces *argv with the UTF-8 arguments,
 * puts stdout and stderr in binary mode (lines end in "\n") and the
 * console in UTF-8. Elsewhere: nothing. */
void qcd_init(int *argc, char ***argv);

/* ---- locks */

void qcd_mutex_init(qcd_mutex *m);
void qcd_mutex_destroy(qcd_mutex *m);
void qcd_mutex_lock(qcd_mutex *m);
void qcd_mutex_unlock(qcd_mutex *m);
void qcd_cond_init(qcd_cond *c);
void qcd_cond_destroy(qcd_cond *c);
void qcd_cond_wait(qcd_cond *c, qcd_mutex *m);
void qcd_cond_signal(qcd_cond *c);

/* ---- stop signals */

/* The stop signal that arrived (0: none). */
extern volatile sig_atomic_t stop_signal;

/*
 * POSIX: block SIGTERM, SIGINT and SIGHUP in this thread (and so in every
 * thread created later: call it before the library starts any), install
 * their handler and ignore SIGPIPE; *wait_mask receives the mask to wait
 * with, which unblocks them. Windows: a console control handler (Ctrl+C:
 * SIGINT; Ctrl+Break: SIGBREAK; closing the console, logoff, shutdown:
 * SIGTERM); *wait_mask is unused.
 */
void qcd_setup_signals(qcd_sigmask *wait_mask);

/* ---- stdin */

#define QCD_READ_EOF 0
#define QCD_READ_AGAIN (-1) /* interrupted (a stop signal?): check and call again */
#define QCD_READ_ERROR (-2) /* an error event was printed */

/* Wait until stdin has input, EOF or a stop signal arrives, then read at
 * most n bytes: the count read (> 0), QCD_READ_EOF, QCD_READ_AGAIN or
 * QCD_READ_ERROR. */
long qcd_read_stdin(const qcd_sigmask *wait_mask, char *buf, size_t n);

/* ---- a wake-up another thread signals */

/* Returns 0, or an errno-style code on failure. */
int qcd_wake_open(qcd_wake *w);
/* From any thread; never blocks. */
void qcd_wake_signal(qcd_wake *w);
/* Wait at most `seconds` for qcd_wake_signal or a stop signal; consumes the
 * wake-ups that arrived. */
void qcd_wake_wait(qcd_wake *w, double seconds, const qcd_sigmask *wait_mask);
void qcd_wake_close(qcd_wake *w);

/* ---- clocks */

/* Milliseconds since 1970-01-01 UTC. */
double qcd_realtime_ms(void);
/* Seconds on a clock that never goes back (arbitrary origin). */
double qcd_monotonic_s(void);

/* ---- processes */

/*
 * Run COMMAND with the system shell (QCD_SHELL_DESC) and wait for it; its
 * stdin is the null device, its stdout and stderr go to our stderr. Its
 * environment is ours, where each "NAME=VALUE" of set_env[0..nset) replaces
 * NAME. POSIX: it starts with the signals we block unblocked and SIGPIPE at
 * its default. Returns QCD_RUN_EXITED with *code its exit status,
 * QCD_RUN_SIGNALED with *code the signal that ended it, or QCD_RUN_FAILED
 * with a message in err[0..errlen).
 */
#define QCD_RUN_FAILED 0
#define QCD_RUN_EXITED 1
#define QCD_RUN_SIGNALED 2
int qcd_run_shell(const char *command, const char *const *set_env, size_t nset, const qcd_sigmask *wait_mask,
                  int *code, char *err, size_t errlen);

/* ---- files */

/* fopen with a UTF-8 path. */
FILE *qcd_fopen(const char *path, const char *mode);
/* The current folder into buf[0..n); returns 0 on failure. */
int qcd_getcwd(char *buf, size_t n);
/* The absolute, resolved form of an existing path into buf[0..n); returns 0
 * on failure. */
int qcd_realpath(const char *path, char *buf, size_t n);
/* Whether s[0..n) is an absolute path. */
int qcd_path_is_absolute(const char *s, size_t n);
/* Whether c separates path components. */
int qcd_is_dir_sep(char c);
/* Whether path names a file this process may run. */
int qcd_is_executable(const char *path);
/* The folder of the loaded module (executable or shared library) that holds
 * the address `addr`; NULL if unknown. Free with free(). */
char *qcd_module_dir(const void *addr);

#endif /* QCDEMO_PLATFORM_H */
