/*
 * qcdemo — a small C host for the qwen-companion C ABI.
 *
 * `qcdemo ide` plays the part of an editor: it starts a companion (the MCP
 * server that Qwen Code connects to), turns commands read from stdin into
 * editor events and prints what happens as JSON lines on stdout.
 * `qcdemo sessions ps|listen|send` joins Qwen Code's cross-session messaging
 * as a participant (qc_participant_*): it lists the live sessions, receives
 * messages (with the hold / release / deny decisions of its user), sends and
 * follows receipts. `qcdemo plugins install|uninstall|list|call|serve` is a
 * plugin host (qc_plugin_host_*). See `qcdemo --help` and
 * `qcdemo SUBCOMMAND --help`.
 *
 * Only the public header is used. The sources:
 *   qcdemo.c            main, the usage text and the subcommand dispatch
 *   qcdemo_common.[ch]  what the subcommands share (buffers, JSON, event
 *                       lines, errors, the log callback, arguments, stdin
 *                       commands, signals; threads and signals are
 *                       described there)
 *   qcdemo_ide.c        `ide`       (qcdemo_ide_main)
 *   qcdemo_sessions.c   `sessions`  (qcdemo_sessions_main)
 *   qcdemo_plugins.c    `plugins`   (qcdemo_plugins_main)
 *   qcdemo_platform.h   what differs between Linux/macOS
 *                       (qcdemo_platform_posix.c) and Windows
 *                       (qcdemo_platform_win32.c)
 * Subcommands are dispatched on argv[1] through the `subcommands` table
 * below; a new one adds its file, its entry point in qcdemo_common.h, a row
 * here and its source to the Makefile's DEMO_SRCS.
 */
#include "qcdemo_common.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* main: subcommand dispatch                                                  */
/* ------------------------------------------------------------------------ */

typedef int (*subcmd_fn)(int argc, char **argv);

static const struct {
    const char *name;
    subcmd_fn fn;
    const char *summary;
} subcommands[] = {
    {"ide", qcdemo_ide_main, "run an IDE companion driven by commands on stdin"},
    {"sessions", qcdemo_sessions_main, "cross-session messaging: ps, listen, send"},
    {"plugins", qcdemo_plugins_main, "plugin host: install, uninstall, list, call, serve"},
};

static void usage(FILE *f)
{
    size_t i;
    fprintf(f,
            "usage: " QCDEMO_NAME " SUBCOMMAND [ARGS...]\n"
            "       " QCDEMO_NAME " --help | --version\n"
            "\n"
            "Demo host for the qwen-companion C library (ABI %u).\n"
            "\n"
            "Subcommands:\n",
            (unsigned)qc_abi_version());
    for (i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fputs("\nRun '" QCDEMO_NAME " SUBCOMMAND --help' for details.\n", f);
}

int main(int argc, char **argv)
{
    size_t i;

    qcd_init(&argc, &argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("%s\n", qc_version());
        return 0;
    }
    for (i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].fn(argc, argv);

    fprintf(stderr, QCDEMO_NAME ": unknown subcommand: %s\n", argv[1]);
    usage(stderr);
    return 2;
}
