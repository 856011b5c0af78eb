package qwen.companion.intellij.core

import qwen.companion.CompanionCli
import qwen.companion.DiscoveryFiles
import qwen.companion.QcPlatform
import qwen.companion.LogLevel
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenHealth
import qwen.companion.QwenParticipant
import qwen.companion.QwenPluginHost
import java.io.File
import java.util.concurrent.CompletableFuture

/** What a host needs to start a companion for one project. */
data class HostSettings(
    /** `ideName` / `ideInfo.displayName`, e.g. "IntelliJ IDEA". */
    val ideName: String,
    /** Workspace roots (made absolute and de-duplicated by [WorkspaceRoots.normalize]). */
    val roots: List<String>,
    /** `ideInfo.name`; null = the library's slug of [ideName]. */
    val ideId: String? = null,
    /** Lock directory override (tests); null = `$QWEN_HOME/ide` or `~/.qwen/ide`. */
    val lockDir: String? = null,
    /** Library file; null = `QWEN_COMPANION_LIB`, then `jna.library.path`/system paths. */
    val libraryPath: String? = null,
    /** Most detailed library log level forwarded to [HostLog]. */
    val logLevel: LogLevel = LogLevel.INFO,
    /** Initial workspace trust (the platform's trusted-projects state); null = the library's default (trusted). */
    val trusted: Boolean? = null,
    /** Context debounce / max wait (null = library defaults). */
    val debounceMs: Long? = null,
    val maxWaitMs: Long? = null,
    /** How long the library waits for the diff handlers (null = 30000); the presenter waits a little less. */
    val requestTimeoutMs: Long? = null,
    /** The CLIs to serve (null = the library's default, Qwen Code). */
    val cli: CompanionCli? = null,
    /** Folder of Gemini CLI's discovery file (tests); null = `<tmpdir>/gemini/ide`, where Gemini CLI looks. */
    val geminiDir: String? = null
)

/** Workspace root handling. */
object WorkspaceRoots {
    /**
     * Absolute, de-duplicated roots in their original order, without trailing
     * separators; [fallback] (the project's base path) when none is left.
     */
    fun normalize(paths: List<String?>, fallback: String? = null): List<String> {
        val out = LinkedHashSet<String>()
        for (p in paths) {
            if (p == null || p.length == 0 || p.indexOf('\u0000') >= 0) continue
            val f = File(p)
            if (!f.isAbsolute) continue
            out.add(strip(f.path))
        }
        if (out.isEmpty() && fallback != null && fallback.length > 0 && File(fallback).isAbsolute) {
            out.add(strip(File(fallback).path))
        }
        return ArrayList(out)
    }

    private fun strip(p: String): String = if (p.length > 1) p.trimEnd('/', File.separatorChar) else p
}

/** The library's health report for the objects an IDE has (see [QwenHealth]). */
object HealthReport {
    /**
     * The report with the checks of each object given; the library is theirs,
     * else the one at [libraryPath] (null: the binding's lookup). Blocks up
     * to about 10 s: never on the UI thread. [qwen] and [gemini] are the
     * commands to check; [cli] (the setting) says which of their checks run
     * (the others are `off`), also when no companion runs.
     */
    fun of(
        companion: QwenCompanion?,
        pluginHost: QwenPluginHost?,
        participant: QwenParticipant?,
        libraryPath: String?,
        qwen: String? = null,
        gemini: String? = null,
        cli: CompanionCli? = null
    ): Map<String, Any?> {
        val library = companion?.library ?: pluginHost?.library ?: participant?.library ?: QwenCompanionLibrary.load(libraryPath)
        return QwenHealth.report(library, companion, pluginHost, participant, qwen = qwen, gemini = gemini, cli = cli)
    }
}

/** Which CLI proposed a diff, from the companion's `openDiffs()` report. */
object DiffProposers {
    /**
     * The `session.label` of [path]'s diff in [report] (`{"clients": N,
     * "diffs": [{"filePath", "session": {"id", "label"}}]}`) when more than
     * one CLI is connected; null otherwise.
     */
    fun label(report: Map<String, Any?>, path: String): String? {
        val clients = (report["clients"] as? Number)?.toInt() ?: 0
        if (clients <= 1) return null
        val diffs = report["diffs"] as? List<*> ?: return null
        for (d in diffs) {
            val m = d as? Map<*, *> ?: continue
            if (m["filePath"] != path) continue
            val label = (m["session"] as? Map<*, *>)?.get("label") as? String
            return if (label.isNullOrBlank()) null else label
        }
        return null
    }
}

/** Formatting of the terminal environment. */
object TerminalEnv {
    /** Puts [env] into a terminal's environment map (later values win over inherited ones). */
    fun applyTo(target: MutableMap<String, String>, env: Map<String, String>) {
        for ((k, v) in env) target[k] = v
    }

    /**
     * The lines to paste into a terminal the IDE did not start, in the syntax
     * of [shellSetting] ("auto", "posix", "fish", "powershell", "cmd"); "auto"
     * follows [shellPath] (the IDE terminal's configured shell), else the OS
     * (PowerShell on Windows, `$SHELL` elsewhere). One line per variable.
     * Throws [IllegalArgumentException] for a value that shell cannot carry
     * (cmd: a line break, `"` or `%`) or an unknown setting.
     */
    fun shellLines(
        env: Map<String, String>,
        shellSetting: String? = "auto",
        shellPath: String? = null,
        os: QcPlatform.Os = QcPlatform.current()
    ): String {
        val shell = if (shellPath.isNullOrBlank()) QcPlatform.shellFor(shellSetting, os) else QcPlatform.shellFor(shellSetting, os, shellPath)
        return QcPlatform.envLines(env, shell).joinToString("") { it + "\n" }
    }
}

/**
 * One companion for one project: creates it with the project's roots, wires
 * the diff handlers to a [DiffController] and editor events through an
 * [EditorContextFeeder], starts it, and closes everything exactly once.
 *
 * IDE-independent; the plugin's project service owns one and disposes it on
 * project close (which also happens on IDE exit).
 */
class CompanionHost(
    settings: HostSettings,
    private val presenter: DiffPresenter,
    readOriginal: (String) -> String?,
    private val log: HostLog
) : AutoCloseable {
    private val lock = Any()
    @Volatile private var settings: HostSettings = settings.copy(roots = WorkspaceRoots.normalize(settings.roots))
    @Volatile private var companion: QwenCompanion? = null
    @Volatile private var isClosed = false

    /** Why the last [start] failed, or the last error the library logged (null while fine). */
    @Volatile var lastError: String? = null
        private set

    /** Connected CLI sessions (from the library's log). */
    val sessions = SessionTracker()

    /** Completed once the companion is freed after [close] (the lock file is gone then). */
    val closed: CompletableFuture<Unit> = CompletableFuture()

    @Volatile private var trusted: Boolean? = settings.trusted

    /** Editor events → companion. */
    val feeder = EditorContextFeeder(CompanionContextSink { companion }, log)

    /** openDiff/closeDiff ↔ diff views. */
    val diffs = DiffController(CompanionDecisionSink { companion }, presenter, readOriginal, log) { path ->
        companion?.let { DiffProposers.label(it.openDiffs(), path) }
    }

    /** The running companion (null before [start], after a failure or [close]). */
    val current: QwenCompanion? get() = companion

    val isRunning: Boolean get() = companion != null

    /** Starts the companion; false (and [lastError]) when it cannot (e.g. library missing). Idempotent. */
    fun start(): Boolean {
        synchronized(lock) {
            if (isClosed) return false
            if (companion != null) return true
            val s = settings
            val c = try {
                QwenCompanion(
                    QwenCompanionConfig(
                        workspaceRoots = s.roots,
                        ideName = s.ideName,
                        ideDisplayName = s.ideName,
                        ideId = s.ideId,
                        lockDir = s.lockDir,
                        trusted = trusted,
                        debounceMs = s.debounceMs,
                        maxWaitMs = s.maxWaitMs,
                        requestTimeoutMs = s.requestTimeoutMs,
                        cli = s.cli,
                        geminiDir = s.geminiDir
                    ),
                    QwenCompanionLibrary.load(s.libraryPath)
                )
            } catch (e: QwenCompanionException) {
                return failed(e)
            }
            try {
                // DEBUG for the session tracker; only up to s.logLevel reaches the IDE's log.
                val maxLevel = if (s.logLevel.code >= LogLevel.DEBUG.code) s.logLevel else LogLevel.DEBUG
                c.setLogHandler({ level, message ->
                    sessions.onLog(message)
                    if (level.code <= s.logLevel.code) forward(level, message)
                }, maxLevel)
                c.onOpenDiff { path, content -> diffs.onOpenDiff(path, content) }
                c.onCloseDiff { path -> diffs.onCloseDiff(path) }
                c.start()
                val files = c.discoveryFiles().toMap().entries.joinToString(", ") { "${it.key}: ${it.value}" }
                log.info("qwen-companion: listening on 127.0.0.1:${c.port()} for ${s.roots}, serving ${Served.names(served)} (discovery files $files)")
            } catch (e: QwenCompanionException) {
                c.close()
                return failed(e)
            }
            companion = c
            lastError = null
            return true
        }
    }

    private fun failed(e: QwenCompanionException): Boolean {
        lastError = e.message
        log.warn("qwen-companion: cannot start: ${e.message}", e)
        return false
    }

    private fun forward(level: LogLevel, message: String) {
        when (level) {
            LogLevel.ERROR -> {
                lastError = message
                log.error("qwen-companion: $message")
            }
            LogLevel.WARN -> log.warn("qwen-companion: $message")
            else -> log.info("qwen-companion: $message")
        }
    }

    /** The CLIs this host's companion serves (the setting it was created with). */
    val served: CompanionCli get() = settings.cli ?: CompanionCli.QWEN

    /** The discovery file of each served CLI; null when not running. */
    fun discoveryFiles(): DiscoveryFiles? {
        val c = companion ?: return null
        return try {
            c.discoveryFiles()
        } catch (e: QwenCompanionException) {
            null
        }
    }

    /** Variables for the IDE's terminals (those of every served CLI); empty when not running. */
    fun terminalEnv(): Map<String, String> {
        val c = companion ?: return emptyMap()
        return try {
            c.terminalEnv()
        } catch (e: QwenCompanionException) {
            emptyMap()
        }
    }

    /**
     * The library's health report (see [QwenHealth]) with this
     * companion's checks (none when it is not running) and those of
     * [pluginHost] and [participant]; [qwen] and [gemini] are the commands
     * to check (the check of a CLI not served is `off`). Blocks up to
     * about 10 s: never on the UI thread.
     */
    fun health(
        pluginHost: QwenPluginHost?,
        participant: QwenParticipant?,
        qwen: String? = null,
        gemini: String? = null
    ): Map<String, Any?> {
        return HealthReport.of(companion, pluginHost, participant, settings.libraryPath, qwen, gemini, served)
    }

    /** The platform's trust state of the project changed (also remembered for a later [start]). */
    fun setTrusted(value: Boolean) {
        trusted = value
        try {
            companion?.setTrusted(value)
        } catch (e: QwenCompanionException) {
            log.warn("qwen-companion: cannot set workspace trust: ${e.message}")
        }
    }

    /** What the status bar shows (see [CompanionStatus]). */
    fun status(extraError: String? = null): CompanionStatus {
        val c = companion
        return CompanionStatus(
            running = c != null,
            port = try { c?.portOrNull() } catch (e: QwenCompanionException) { null },
            connectedClis = if (c == null) 0 else sessions.connected,
            pendingDiffs = diffs.openSessions().size,
            lastError = lastError ?: extraError,
            served = served,
            discoveryFiles = if (c == null) null else discoveryFiles()
        )
    }

    /** The project's roots changed (rewrites the discovery files when running). */
    fun updateRoots(roots: List<String?>, fallback: String? = null) {
        val normalized = WorkspaceRoots.normalize(roots, fallback)
        synchronized(lock) {
            if (normalized == settings.roots) return
            settings = settings.copy(roots = normalized)
        }
        try {
            companion?.setWorkspaceRoots(normalized)
        } catch (e: QwenCompanionException) {
            log.warn("qwen-companion: cannot update workspace roots: ${e.message}")
        }
    }

    /**
     * Closes the diff views and the companion (lock file removed), in the
     * order that cannot hang the IDE: the presenter is disposed first (a
     * callback waiting for the UI gives up at once), then the companion is
     * freed on a background thread, because freeing joins the library's
     * callback thread, which may still be inside a handler that waits for
     * something the closing thread holds (IntelliJ disposes projects on the
     * UI thread, under the write lock). Returns at once; [closed] completes
     * when the companion is freed. Idempotent.
     */
    override fun close() {
        val c = synchronized(lock) {
            if (isClosed) return
            isClosed = true
            val c = companion
            companion = null
            c
        }
        diffs.closeAll()
        presenter.dispose()
        sessions.clear()
        if (c == null) {
            closed.complete(Unit)
            return
        }
        val t = Thread({
            try {
                c.close()
            } catch (e: QwenCompanionException) {
                log.warn("qwen-companion: close failed: ${e.message}")
            } catch (t: Throwable) {
                log.error("qwen-companion: close failed", t)
            } finally {
                closed.complete(Unit)
            }
        }, "qwen-companion-close")
        t.isDaemon = true
        t.start()
    }
}
