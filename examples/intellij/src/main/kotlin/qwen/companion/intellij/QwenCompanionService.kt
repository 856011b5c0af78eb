package qwen.companion.intellij

import com.intellij.ide.plugins.PluginManagerCore
import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.Disposable
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ApplicationNamesInfo
import com.intellij.openapi.application.runReadAction
import com.intellij.openapi.components.Service
import com.intellij.openapi.diagnostic.Logger
import com.intellij.openapi.diagnostic.logger
import com.intellij.openapi.extensions.PluginId
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.project.Project
import com.intellij.openapi.roots.ModuleRootEvent
import com.intellij.openapi.roots.ModuleRootListener
import com.intellij.openapi.roots.ProjectRootManager
import com.intellij.openapi.vfs.LocalFileSystem
import qwen.companion.QwenCompanionLibrary
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.HostLog
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.WorkspaceRoots
import java.nio.file.Files

/**
 * One Qwen Code companion per project. Started by [QwenCompanionStartup];
 * disposed by the platform when the project closes (also on IDE exit), which
 * first disposes the listeners registered with it as parent, then stops the
 * companion and removes its lock file.
 *
 * Everything with logic lives in `qwen.companion.intellij.core` (plain Kotlin,
 * tested against the real library); this class only reads the platform.
 */
@Service(Service.Level.PROJECT)
class QwenCompanionService(private val project: Project) : Disposable {
    private val log: Logger = logger<QwenCompanionService>()
    private val lock = Any()
    @Volatile private var host: CompanionHost? = null

    fun start() {
        val h = synchronized(lock) {
            if (host != null || project.isDisposed) return
            CompanionHost(
                HostSettings(
                    ideName = ApplicationNamesInfo.getInstance().fullProductName,
                    roots = contentRoots(),
                    libraryPath = libraryPath()
                ),
                IntellijDiffPresenter(project),
                this::readOriginal,
                IdeaHostLog(log)
            ).also { host = it }
        }
        if (!h.start()) {
            notifyUser("Qwen Code companion is off: ${h.lastError}")
            return
        }
        EditorListeners.install(project, h.feeder, this)
        project.messageBus.connect(this).subscribe(ModuleRootListener.TOPIC, object : ModuleRootListener {
            override fun rootsChanged(event: ModuleRootEvent) {
                h.updateRoots(contentRoots(), project.basePath)
            }
        })
        ApplicationManager.getApplication().invokeLater(Runnable { EditorListeners.reportOpenEditors(project, h.feeder) }, project.disposed)
    }

    /** Variables for the IDE's terminals (empty when the companion is not running). */
    fun terminalEnv(): Map<String, String> = host?.terminalEnv() ?: emptyMap()

    override fun dispose() {
        val h = synchronized(lock) { host.also { host = null } }
        h?.close()
    }

    private fun contentRoots(): List<String> {
        val roots = runReadAction {
            ProjectRootManager.getInstance(project).contentRoots.filter { it.isInLocalFileSystem }.map { it.path }
        }
        return WorkspaceRoots.normalize(roots, project.basePath)
    }

    /** The file's text as the user sees it (unsaved edits included); null for a new file. */
    private fun readOriginal(path: String): String? {
        val vf = LocalFileSystem.getInstance().findFileByPath(path) ?: return null
        if (vf.isDirectory) return null
        return runReadAction { FileDocumentManager.getInstance().getDocument(vf)?.text }
            ?: String(vf.contentsToByteArray(), vf.charset)
    }

    /** `QWEN_COMPANION_LIB`, else the library bundled in the plugin's `native/` folder, else JNA's search. */
    private fun libraryPath(): String? {
        val env = System.getenv(QwenCompanionLibrary.ENV_VAR)
        if (env != null && env.isNotBlank()) return env
        val plugin = PluginManagerCore.getPlugin(PluginId.getId(PLUGIN_ID)) ?: return null
        val bundled = plugin.pluginPath.resolve("native").resolve(System.mapLibraryName(QwenCompanionLibrary.LIBRARY_NAME))
        return if (Files.isRegularFile(bundled)) bundled.toString() else null
    }

    private fun notifyUser(message: String) {
        NotificationGroupManager.getInstance()
            .getNotificationGroup(NOTIFICATION_GROUP)
            .createNotification(message, NotificationType.WARNING)
            .notify(project)
    }

    private class IdeaHostLog(private val log: Logger) : HostLog {
        override fun info(message: String) = log.info(message)
        override fun warn(message: String, error: Throwable?) = log.warn(message, error)
        // Logger.error would pop the IDE's "internal error" balloon; the core's errors are ours, not the IDE's.
        override fun error(message: String, error: Throwable?) = log.warn(message, error)
    }

    companion object {
        const val PLUGIN_ID = "qwen.companion.intellij"
        const val NOTIFICATION_GROUP = "Qwen Code Companion"
    }
}
