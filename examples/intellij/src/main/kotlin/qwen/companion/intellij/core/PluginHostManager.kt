package qwen.companion.intellij.core

import qwen.companion.QcBundled
import qwen.companion.QcPlatform
import qwen.companion.LogLevel
import qwen.companion.QwenCompanionException
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenPluginHost
import qwen.companion.QwenPluginHostConfig
import java.io.File
import java.io.IOException
import java.nio.file.Files
import java.nio.file.StandardCopyOption

/** What the IDE-wide plugin host needs (one per IDE process). */
data class PluginHostSettings(
    /** Plugins directory; null = the library's default (`$QWEN_HOME/companion/plugins`). */
    val pluginsDir: String? = null,
    /** Library file; null = `QWEN_COMPANION_LIB`, then JNA's search. */
    val libraryPath: String? = null,
    /**
     * A `qc-mcp-bridge` file to copy to [bridgeDir]; null = the one the binding jar carries
     * for this platform ([QcBundled]), else the one next to the loaded library.
     */
    val bridgeSource: String? = null,
    /** Stable folder the bridge is copied to; the settings entry names it. Null = `<qwen home>/companion/bin`. */
    val bridgeDir: String? = null,
    /** Register `qwen-companion-plugins` in the user's `settings.json` (once per IDE process). */
    val registerMcp: Boolean = true,
    /** Register in this project's `.qwen/settings.json` instead of the user's (tests); null = user scope. */
    val registerProject: String? = null,
    /** The entry declares every tool up front (`alwaysLoadTools`). */
    val alwaysLoadTools: Boolean = false,
    /**
     * Folders written to the MCP lock file (the bridge prefers the IDE whose
     * folders hold its cwd, then the newest IDE): the projects open when the
     * host starts. The first is also the host's `workspaceRoot` (`context.cwd`
     * of calls from the IDE that give none).
     */
    val workspacePaths: List<String> = emptyList(),
    /** Lock directory of the plugin MCP server (tests); null = the library's default. */
    val mcpLockDir: String? = null,
    /** Most detailed library log level forwarded to [HostLog]. */
    val logLevel: LogLevel = LogLevel.INFO
)

/** Shows a plugin's `show_notification` to the user (a balloon in the IDE). */
interface PluginNotifier {
    /**
     * [plugin] is the plugin's id, [params] the request's params (`title`,
     * `body`/`message`, `level`, and `view` when the notification opens a view).
     * Returns whether it was shown.
     */
    fun show(plugin: String, params: Map<String, Any?>): Boolean
}

/** Where Qwen Code's home is: `$QWEN_HOME`, else `~/.qwen` (the library's rule). */
object QwenHome {
    fun dir(env: (String) -> String? = System::getenv): File {
        val h = env("QWEN_HOME")
        if (h != null && h.isNotEmpty()) return File(h)
        return File(System.getProperty("user.home"), ".qwen")
    }
}

/**
 * Copies `qc-mcp-bridge` (`qc-mcp-bridge.exe` on Windows) to a stable place:
 * the `mcpServers` entry names the executable, and the plugin's own folder
 * moves with every plugin update. [QcBundled.installFile] does the copy: a
 * user-only folder and file (0700), written to a temporary file and renamed
 * into place, and only when the content differs (SHA-256), so a running
 * bridge is never overwritten in place; a symbolic link is never followed.
 * Windows refuses to replace an executable a running `qwen` has started but
 * lets it be renamed: there the old bridge is moved aside (`<name>.old-<pid>`)
 * and removed once no process runs it.
 */
object BridgeInstaller {
    /** The bridge's file name on this OS ([QcPlatform.bridgeFileName]). */
    val NAME: String get() = QcPlatform.bridgeFileName()

    /** Installs [source] into [destDir]; returns the installed path. [windows] and [move] are for tests. */
    fun install(
        source: File,
        destDir: File,
        windows: Boolean = QcPlatform.current() == QcPlatform.Os.WINDOWS,
        move: (java.nio.file.Path, java.nio.file.Path) -> Unit = { a, b ->
            Files.move(a, b, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
        }
    ): File {
        if (!source.isFile) throw IOException("the MCP bridge $source does not exist")
        val digest = QcBundled.hex(source.inputStream().use { QcBundled.sha256(it) })
        return QcBundled.installFile(File(destDir, source.name), digest, { source.inputStream() }, windows, move)
    }
}

/**
 * The IDE-wide plugin host: ONE [QwenPluginHost] per IDE process, created
 * lazily by the first [host] call, with its plugin MCP server started
 * (`mcpStart`), the bridge installed and the `qwen-companion-plugins` entry
 * registered in the user's `settings.json` once, and `show_notification`
 * answered through [notifier]. A failure is remembered ([lastError]) and
 * not retried until [reset]: the IDE reports it once.
 *
 * IDE-independent (the plugin's application service owns one).
 */
class PluginHostManager(
    private val settings: PluginHostSettings,
    private val notifier: PluginNotifier,
    private val log: HostLog
) : AutoCloseable {
    private val lock = Any()
    private var host: QwenPluginHost? = null
    private var failed = false
    private var closed = false

    /** Why the host could not start (null while fine). */
    @Volatile var lastError: String? = null
        private set

    /** `mcpInfo()` of the running server (null when it does not run). */
    @Volatile var mcpInfo: Map<String, Any?>? = null
        private set

    /** What [registerMcp] answered (null before / when off or failed). */
    @Volatile var registration: Map<String, Any?>? = null
        private set

    /** Extra capability handlers installed on every host this manager creates (name -> handler). */
    private val extraCapabilities = LinkedHashMap<String, (Map<String, Any?>) -> Any?>()
    private val eventListeners = ArrayList<(Map<String, Any?>) -> Unit>()

    /** The running host, created on first use; null when it failed (see [lastError]) or after [close]. */
    fun host(create: Boolean = true): QwenPluginHost? {
        synchronized(lock) {
            host?.let { return it }
            if (!create || closed || failed) return null
            return try {
                startLocked()
            } catch (e: QwenCompanionException) {
                fail("the plugin host cannot start: ${e.message}", e)
            } catch (e: IOException) {
                fail("the plugin host cannot start: ${e.message}", e)
            }
        }
    }

    private fun fail(message: String, e: Exception): QwenPluginHost? {
        failed = true
        lastError = message
        log.warn("qwen-companion: $message", e)
        return null
    }

    private fun startLocked(): QwenPluginHost {
        val library = QwenCompanionLibrary.load(settings.libraryPath)
        val h = QwenPluginHost(QwenPluginHostConfig(pluginsDir = settings.pluginsDir, workspaceRoot = settings.workspacePaths.firstOrNull()), library)
        try {
            h.setLogHandler({ level, message -> forward(level, message) }, settings.logLevel)
            h.setCapability("show_notification") { request -> showNotification(request) }
            for ((name, handler) in extraCapabilities) h.setCapability(name, handler)
            h.onEvent { event -> dispatchEvent(event) }
            val mcpConfig = LinkedHashMap<String, Any?>()
            if (settings.workspacePaths.isNotEmpty()) mcpConfig["workspacePaths"] = settings.workspacePaths
            if (settings.mcpLockDir != null) mcpConfig["lockDir"] = settings.mcpLockDir
            val info = h.mcpStart(mcpConfig)
            mcpInfo = info
            log.info("qwen-companion: plugin MCP server ${info["serverName"]} on ${info["url"]} (plugins in ${h.pluginsDir})")
        } catch (e: Exception) {
            h.close()
            mcpInfo = null
            throw e
        }
        host = h
        lastError = null
        if (settings.registerMcp) register(library)
        return h
    }

    /** The bridge copy + the user-scope entry; a failure here leaves the host running (logged, [lastError]). */
    private fun register(library: QwenCompanionLibrary) {
        try {
            val dir = settings.bridgeDir?.let { File(it) } ?: File(QwenHome.dir(), "companion/bin")
            val bridge = when {
                settings.bridgeSource != null -> BridgeInstaller.install(File(settings.bridgeSource), dir)
                QcBundled.hasBridge() -> QcBundled.installBridge(dir)
                else -> BridgeInstaller.install(bridgeNextTo(library), dir)
            }
            val r = QwenPluginHost.registerMcp(
                if (settings.registerProject == null) "user" else "project", settings.registerProject, bridge.path, settings.alwaysLoadTools, library)
            registration = r
            log.info("qwen-companion: ${r["serverName"]} ${r["change"]} in ${r["settings"]}")
        } catch (e: QwenCompanionException) {
            lastError = "cannot register the plugin tools with Qwen Code: ${e.message}"
            log.warn("qwen-companion: $lastError", e)
        } catch (e: IOException) {
            lastError = "cannot register the plugin tools with Qwen Code: ${e.message}"
            log.warn("qwen-companion: $lastError", e)
        }
    }

    /** `qc-mcp-bridge` next to the loaded library file (a jar without natives: a development build). */
    private fun bridgeNextTo(library: QwenCompanionLibrary): File {
        val lib = File(library.location)
        if (!lib.isAbsolute) throw IOException("no bridge configured, the plugin's jar carries none for ${QcBundled.prefix}, and the library was found by name (${library.location}), not by path")
        return File(lib.parentFile, BridgeInstaller.NAME)
    }

    private fun showNotification(request: Map<String, Any?>): Any? {
        val plugin = request["plugin"] as? String ?: ""
        @Suppress("UNCHECKED_CAST")
        val params = request["params"] as? Map<String, Any?> ?: emptyMap()
        val shown = try {
            notifier.show(plugin, params)
        } catch (e: RuntimeException) {
            log.warn("qwen-companion: showing a notification of $plugin failed", e)
            false
        }
        // The plugin format's answer: {shown: true} or {shown: false, reason}.
        return if (shown) mapOf("shown" to true) else mapOf("shown" to false, "reason" to "disabled")
    }

    private fun forward(level: LogLevel, message: String) {
        when (level) {
            LogLevel.ERROR -> log.error("qwen-companion plugins: $message")
            LogLevel.WARN -> log.warn("qwen-companion plugins: $message")
            else -> log.info("qwen-companion plugins: $message")
        }
    }

    /**
     * Adds a capability handler (e.g. a plugin-UI module's own); installed on
     * the running host at once and on any later one. Replaces `show_notification`
     * only if [name] is that.
     */
    fun setCapability(name: String, handler: (Map<String, Any?>) -> Any?) {
        val h = synchronized(lock) {
            extraCapabilities[name] = handler
            host
        }
        h?.setCapability(name, handler)
    }

    /** Adds a listener of the host's events (`ui_push`, `plugin_*`, `views_changed`), on the `qc-cb` thread. */
    fun addEventListener(listener: (Map<String, Any?>) -> Unit) {
        synchronized(lock) { eventListeners.add(listener) }
    }

    private fun dispatchEvent(event: Map<String, Any?>) {
        val ls = synchronized(lock) { ArrayList(eventListeners) }
        for (l in ls) {
            try {
                l(event)
            } catch (e: RuntimeException) {
                log.warn("qwen-companion: a plugin event listener failed", e)
            }
        }
    }

    /** Variables the plugin MCP server needs in a terminal (`mcpInfo().env`; empty with the bridge). */
    fun terminalEnv(): Map<String, String> {
        val env = mcpInfo?.get("env") as? Map<*, *> ?: return emptyMap()
        val out = LinkedHashMap<String, String>()
        for ((k, v) in env) if (k is String && v != null) out[k] = v.toString()
        return out
    }

    /** Forgets a failure so the next [host] call tries again (after the user changed the settings). */
    fun reset() {
        val h = synchronized(lock) {
            failed = false
            lastError = null
            host.also { host = null; mcpInfo = null }
        }
        if (h != null) shutDown(h)
    }

    /** Ends every plugin and the MCP server (lock file removed). Idempotent. */
    override fun close() {
        val h = synchronized(lock) {
            closed = true
            host.also { host = null; mcpInfo = null }
        }
        if (h != null) shutDown(h)
    }

    /** Stops the MCP server first (it returns once the lock file is gone and bridges are told), then frees the host. */
    private fun shutDown(h: QwenPluginHost) {
        try {
            h.mcpStop()
        } catch (e: QwenCompanionException) {
            log.warn("qwen-companion: stopping the plugin MCP server: ${e.message}")
        }
        h.close()
    }
}
