package qwen.companion.intellij

import com.intellij.ide.BrowserUtil
import com.intellij.notification.NotificationAction
import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.Disposable
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.service
import com.intellij.openapi.diagnostic.Logger
import com.intellij.openapi.diagnostic.logger
import com.intellij.openapi.project.ProjectManager
import qwen.companion.QwenPluginHost
import qwen.companion.intellij.core.BridgeInstaller
import qwen.companion.intellij.core.EditorTools
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.PluginHostManager
import qwen.companion.intellij.core.PluginHostSettings
import qwen.companion.intellij.core.PluginNotifier
import qwen.companion.intellij.core.WorkspaceRoots
import java.io.File
import java.util.concurrent.atomic.AtomicBoolean

/**
 * The IDE-wide plugin host: ONE [QwenPluginHost] per IDE process (see
 * [PluginHostManager]), created by the first [host] call, with its plugin
 * MCP server running and `qwen-companion-plugins` registered once in the
 * user's `~/.qwen/settings.json` (through the `qc-mcp-bridge` copied to
 * `~/.qwen/companion/bin/`). Plugins' `show_notification` requests become
 * balloons; one whose `view` the view server resolved gets an "Open" action.
 * Disposed (every plugin ended, lock file removed) when the IDE exits.
 */
@Service(Service.Level.APP)
class QwenPluginHostService : Disposable {
    private val log: Logger = logger<QwenPluginHostService>()
    private val reported = AtomicBoolean(false)
    @Volatile private var manager: PluginHostManager? = null
    private val lock = Any()

    /**
     * Opens a plugin view whose notification the user clicked (plugin id,
     * the notification's `view` object `{id, title, url}`). The default opens
     * the URL in the browser; the plugin-UI part replaces it with its tool window.
     */
    @Volatile var viewOpener: (String, Map<String, Any?>) -> Unit = { _, view ->
        (view["url"] as? String)?.let { BrowserUtil.browse(it) }
    }

    /** The running host, or null when disabled in the settings or failing (the error is shown once). */
    fun host(): QwenPluginHost? {
        val options = QwenSettings.getInstance().options
        if (!options.pluginHostEnabled) return null
        val m = synchronized(lock) {
            manager ?: PluginHostManager(
                PluginHostSettings(
                    pluginsDir = options.pluginsDir,
                    libraryPath = QwenCompanionService.libraryPath(),
                    bridgeSource = bundledBridge(),
                    registerMcp = options.registerMcp,
                    alwaysLoadTools = options.alwaysLoadTools,
                    workspacePaths = openProjectRoots()
                ),
                Notifier(),
                IdeaHostLog(log)
            ).also {
                // The editor tools, offered before the host's MCP server starts (Qwen Code lists tools once).
                EditorTools(IdeEditorModel(), IdeaHostLog(log)).install(it)
                manager = it
            }
        }
        val h = m.host()
        val error = m.lastError
        if (error != null && reported.compareAndSet(false, true)) {
            notifyUser("Qwen Code plugins: $error", NotificationType.WARNING)
        }
        return h
    }

    /** The manager (capabilities and event listeners of the other parts), created with the host. */
    fun manager(): PluginHostManager? {
        host()
        return manager
    }

    /** Why the host is not running (null when it runs or was never asked for). */
    val lastError: String? get() = manager?.lastError

    /** Variables a terminal needs for the plugin MCP server (empty with the bridge; none when off). */
    fun terminalEnv(): Map<String, String> = if (host() == null) emptyMap() else manager?.terminalEnv() ?: emptyMap()

    /** The settings changed: the next [host] call starts a host with the new ones. */
    fun restart() {
        val m = synchronized(lock) { manager.also { manager = null } }
        reported.set(false)
        if (m != null) ApplicationManager.getApplication().executeOnPooledThread(Runnable { m.close() })
    }

    override fun dispose() {
        val m = synchronized(lock) { manager.also { manager = null } }
        m?.close()
    }

    private fun openProjectRoots(): List<String> =
        WorkspaceRoots.normalize(ProjectManager.getInstance().openProjects.map { it.basePath })

    /**
     * `qc-mcp-bridge` next to `QWEN_COMPANION_LIB` when that is set and holds one; else null:
     * the manager installs the bridge the binding jar carries for this OS and CPU.
     */
    private fun bundledBridge(): String? {
        val lib = QwenCompanionService.libraryPath() ?: return null
        val f = File(File(lib).parentFile, BridgeInstaller.NAME)
        return if (f.isFile) f.path else null
    }

    private fun notifyUser(message: String, type: NotificationType) {
        NotificationGroupManager.getInstance()
            .getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
            .createNotification(message, type)
            .notify(null)
    }

    /** show_notification → a balloon (any thread: notify() posts to the UI itself). */
    private inner class Notifier : PluginNotifier {
        override fun show(plugin: String, params: Map<String, Any?>): Boolean {
            val title = (params["title"] as? String)?.takeIf { it.isNotBlank() } ?: plugin
            val body = (params["body"] as? String) ?: (params["message"] as? String) ?: ""
            val type = when (params["level"]) {
                "error" -> NotificationType.ERROR
                "warning", "warn" -> NotificationType.WARNING
                else -> NotificationType.INFORMATION
            }
            val n = NotificationGroupManager.getInstance()
                .getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
                .createNotification(title, body, type)
            @Suppress("UNCHECKED_CAST")
            val view = params["view"] as? Map<String, Any?>
            if (view != null && view["url"] is String) {
                val label = (view["title"] as? String)?.let { "Open $it" } ?: "Open"
                n.addAction(NotificationAction.createSimpleExpiring(label, Runnable { viewOpener(plugin, view) }))
            }
            n.notify(null)
            return true
        }
    }

    companion object {
        fun getInstance(): QwenPluginHostService = service<QwenPluginHostService>()
    }
}

/**
 * IntelliJ's Logger (idea.log) as the core's [HostLog]; every line also goes
 * to [QwenCompanionLog] for "Show Qwen Companion Log".
 */
internal class IdeaHostLog(private val log: Logger) : HostLog {
    override fun info(message: String) {
        QwenCompanionLog.ring.add("INFO", message)
        log.info(message)
    }

    override fun warn(message: String, error: Throwable?) {
        QwenCompanionLog.ring.add("WARN", if (error == null) message else "$message: $error")
        log.warn(message, error)
    }

    // Logger.error would pop the IDE's "internal error" balloon; the core's errors are ours, not the IDE's.
    override fun error(message: String, error: Throwable?) {
        QwenCompanionLog.ring.add("ERROR", if (error == null) message else "$message: $error")
        log.warn(message, error)
    }
}
