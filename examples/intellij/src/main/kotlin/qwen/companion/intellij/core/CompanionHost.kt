package qwen.companion.intellij.core

import qwen.companion.QcPlatform
import qwen.companion.LogLevel
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionConfig
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
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
    val requestTimeoutMs: Long? = null
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
    val diffs = DiffController(CompanionDecisionSink { companion }, presenter, readOriginal, log)

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
                        requestTimeoutMs = s.requestTimeoutMs
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
                log.info("qwen-companion: listening on 127.0.0.1:${c.port()} for ${s.roots} (lock file ${c.lockFilePath()})")
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

    /** Variables for the IDE's terminals; empty when not running. */
    fun terminalEnv(): Map<String, String> {
        val c = companion ?: return emptyMap()
        return try {
            c.terminalEnv()
        } catch (e: QwenCompanionException) {
            emptyMap()
        }
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
            lastError = lastError ?: extraError
        )
    }

    /** The project's roots changed (rewrites the lock file when running). */
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
