package qwen.companion.intellij

import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.Disposable
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ApplicationNamesInfo
import com.intellij.openapi.application.runReadAction
import com.intellij.openapi.components.Service
import com.intellij.openapi.diagnostic.Logger
import com.intellij.openapi.diagnostic.logger
import com.intellij.ide.impl.isTrusted
import com.intellij.ide.trustedProjects.TrustedProjectsListener
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.project.Project
import com.intellij.openapi.roots.ModuleRootEvent
import com.intellij.openapi.roots.ModuleRootListener
import com.intellij.openapi.roots.ProjectRootManager
import com.intellij.openapi.util.Disposer
import com.intellij.openapi.vfs.LocalFileSystem
import qwen.companion.CompanionCli
import qwen.companion.DiscoveryFiles
import qwen.companion.QwenCompanionLibrary
import qwen.companion.QwenPluginHost
import qwen.companion.intellij.core.CompanionHost
import qwen.companion.intellij.core.CompanionOptions
import qwen.companion.intellij.core.CompanionStatus
import qwen.companion.intellij.core.HealthReport
import qwen.companion.intellij.core.HostSettings
import qwen.companion.intellij.core.ParticipantNames
import qwen.companion.intellij.core.Served
import qwen.companion.intellij.core.WorkspaceRoots
import java.io.File
import java.util.concurrent.atomic.AtomicBoolean

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
    @Volatile private var disposed = false
    /** Parent of the current host's listeners; disposed by [stop] (and with the service). */
    private var hostDisposable: Disposable? = null
    private var wiredFor: CompanionHost? = null
    private val failureShown = AtomicBoolean(false)

    /**
     * Starts the project's companion (idempotent; a second caller waits for the
     * first). Called by [QwenCompanionStartup] and by [QwenTerminalCustomizer],
     * since terminals restored at project open may start before the startup
     * activity runs. Any thread but the UI thread.
     */
    fun start() {
        val options = QwenSettings.getInstance().options
        if (!options.enabled || disposed) return
        // Read the platform before taking our lock: never wait for a read action while holding it.
        val existing = host
        val roots = if (existing == null) contentRoots() else emptyList()
        val trusted = existing == null && project.isTrusted()
        val h = synchronized(lock) {
            if (disposed || project.isDisposed) return
            host ?: run {
                val d = Disposer.newDisposable("qwen-companion host")
                Disposer.register(this, d)
                hostDisposable = d
                newHost(d, roots, trusted, options)
            }.also { host = it }
        }
        if (!h.start()) {
            val why = h.lastError ?: return // closed meanwhile
            if (failureShown.compareAndSet(false, true)) notifyUser("Qwen Code companion is off: $why")
            return
        }
        val parent = synchronized(lock) {
            if (host !== h || wiredFor === h) return
            wiredFor = h
            hostDisposable!!
        }
        wire(h, parent)
    }

    /** Starts the companion on a pooled thread (from the UI thread, e.g. the settings page). */
    fun startInBackground() {
        ApplicationManager.getApplication().executeOnPooledThread(Runnable { start() })
    }

    /** Stops the companion (the settings turned it off); [start] creates a new one. */
    fun stop() {
        val (h, d) = synchronized(lock) {
            val pair = Pair(host, hostDisposable)
            host = null
            hostDisposable = null
            wiredFor = null
            pair
        }
        if (d != null) Disposer.dispose(d)
        h?.close()
    }

    /**
     * Replaces a running companion with one made from the current settings
     * (the CLIs to serve or a timing option changed): it gets a new port, so
     * CLIs already running lose the IDE; terminals opened afterwards get the
     * new variables. Nothing happens when no companion runs. UI thread or any.
     */
    fun restart() {
        if (host == null) return
        stop()
        failureShown.set(false)
        startInBackground()
    }

    private fun newHost(parent: Disposable, roots: List<String>, trusted: Boolean, options: CompanionOptions): CompanionHost =
        CompanionHost(
                HostSettings(
                    ideName = ApplicationNamesInfo.getInstance().fullProductName,
                    roots = roots,
                    libraryPath = libraryPath(),
                    trusted = trusted,
                    debounceMs = options.debounceMs,
                    maxWaitMs = options.maxWaitMs,
                    requestTimeoutMs = options.requestTimeoutMs,
                    cli = options.cli
                ),
                IntellijDiffPresenter(project, options.showTimeoutMs, parent),
                this::readOriginal,
                IdeaHostLog(log)
            )

    /** Platform listeners → the running host [h], all removed with [parent]. */
    private fun wire(h: CompanionHost, parent: Disposable) {
        EditorListeners.install(project, h.feeder, parent)
        project.messageBus.connect(parent).subscribe(ModuleRootListener.TOPIC, object : ModuleRootListener {
            override fun rootsChanged(event: ModuleRootEvent) {
                h.updateRoots(contentRoots(), project.basePath)
            }
        })
        // Workspace trust follows the platform's trusted-projects state (safe mode = untrusted).
        ApplicationManager.getApplication().messageBus.connect(parent).subscribe(TrustedProjectsListener.TOPIC, object : TrustedProjectsListener {
            override fun onProjectTrusted(project: Project) {
                if (project == this@QwenCompanionService.project) h.setTrusted(true)
            }

            override fun onProjectUntrusted(project: Project) {
                if (project == this@QwenCompanionService.project) h.setTrusted(false)
            }
        })
        h.setTrusted(project.isTrusted()) // may have changed while starting
        ApplicationManager.getApplication().invokeLater(Runnable { EditorListeners.reportOpenEditors(project, h.feeder) }, project.disposed)
        // The IDE-wide plugin host next to the companion (this runs off the UI thread).
        pluginHost()
    }

    /**
     * Variables for the IDE's terminals: the companion's, those of every CLI
     * it serves (`QWEN_CODE_IDE_SERVER_PORT`, `QWEN_CODE_IDE_WORKSPACE_PATH`;
     * `GEMINI_CLI_IDE_SERVER_PORT`, `GEMINI_CLI_IDE_WORKSPACE_PATH`,
     * `GEMINI_CLI_IDE_PID`; none when it is not running) merged with the
     * plugin MCP server's.
     */
    fun terminalEnv(): Map<String, String> {
        val env = LinkedHashMap<String, String>()
        QwenPluginHostService.getInstance().terminalEnv().let { env.putAll(it) }
        host?.terminalEnv()?.let { env.putAll(it) }
        return env
    }

    /**
     * The IDE-wide plugin host (one per IDE process, shared by every project),
     * created on first use with its MCP server running and registered with
     * Qwen Code; null when disabled in the settings or when it cannot start.
     */
    fun pluginHost(): QwenPluginHost? = QwenPluginHostService.getInstance().host()

    /** The CLIs the running companion serves, else those of the settings. */
    val servedCli: CompanionCli get() = host?.served ?: QwenSettings.getInstance().options.cli

    /** The discovery file of each CLI served; null when the companion is not running. */
    fun discoveryFiles(): DiscoveryFiles? = host?.discoveryFiles()

    /** The project this companion serves. */
    val projectName: String get() = project.name

    /** The project's workspace roots (absolute, de-duplicated). */
    fun workspaceRoots(): List<String> = contentRoots()

    /**
     * The name of this project's cross-session messaging participant: the
     * setting, else `intellij-<project>` (see [ParticipantNames.derive]).
     */
    val participantName: String
        get() = QwenSettings.getInstance().options.participantName ?: ParticipantNames.derive("intellij", project.name)

    /**
     * The library's health report with this project's companion (when it
     * runs), the IDE's plugin host and [participant]; `qwen` and `gemini` are
     * the first words of the run commands of the settings (the check of a CLI
     * not served is `off`). Blocks for up to about 10 s
     * (it runs `qwen --version`, `gemini --version` and `node --version`):
     * never on the UI thread.
     */
    fun health(participant: qwen.companion.QwenParticipant?): Map<String, Any?> {
        val options = QwenSettings.getInstance().options
        val qwen = firstWord(options.runCommand)
        val gemini = firstWord(options.geminiCommand)
        val plugins = QwenPluginHostService.getInstance().host()
        return host?.health(plugins, participant, qwen, gemini)
            ?: HealthReport.of(null, plugins, participant, libraryPath(), qwen, gemini, options.cli)
    }

    /** The lines above the health report: the CLIs served and their discovery files. */
    fun servedText(): String = Served.lines(servedCli, discoveryFiles()).joinToString("") { it + "\n" }

    private fun firstWord(command: String): String? =
        command.trim().split(Regex("\\s+")).firstOrNull()?.takeIf { it.isNotEmpty() }

    /** "Close All Qwen Diffs": rejects every open diff of the project; how many. Any thread. */
    fun rejectAllDiffs(): Int = host?.diffs?.rejectAll() ?: 0

    /** What the status bar widget shows; null when the companion is off in the settings. */
    fun status(): CompanionStatus? {
        val options = QwenSettings.getInstance().options
        val h = host ?: return if (options.enabled) CompanionStatus(false, null, 0, 0, null, options.cli) else null
        return h.status(QwenPluginHostService.getInstance().lastError)
    }

    /**
     * Disposal (project close, on the UI thread under the write lock): the
     * host disposes the diff views at once and frees the companion on a
     * background thread, so a callback still inside a handler never blocks
     * the IDE.
     */
    override fun dispose() {
        val h = synchronized(lock) {
            disposed = true
            host.also { host = null }
        }
        h?.close()
    }

    private fun contentRoots(): List<String> {
        val roots = runReadAction {
            ProjectRootManager.getInstance(project).contentRoots.filter { it.isInLocalFileSystem }.map { it.path }
        }
        return WorkspaceRoots.normalize(roots, project.basePath)
    }

    /**
     * The file's text as the user sees it (unsaved edits included); null for a
     * new file. Runs on the library's callback thread WITHOUT a read action (a
     * project disposal holding the write lock would block it, and the disposal
     * waits for this thread): an open document's immutable snapshot, else the
     * file from disk.
     */
    private fun readOriginal(path: String): String? {
        val vf = LocalFileSystem.getInstance().findFileByPath(path)
        if (vf != null && !vf.isDirectory) {
            val cached = FileDocumentManager.getInstance().getCachedDocument(vf)
            if (cached != null) return cached.immutableCharSequence.toString()
            return String(vf.contentsToByteArray(), vf.charset)
        }
        val f = File(path)
        return if (f.isFile) f.readText() else null
    }


    private fun notifyUser(message: String) {
        NotificationGroupManager.getInstance()
            .getNotificationGroup(NOTIFICATION_GROUP)
            .createNotification(message, NotificationType.WARNING)
            .notify(project)
    }

    companion object {
        const val PLUGIN_ID = "qwen.companion.intellij"
        const val NOTIFICATION_GROUP = "Qwen Code Companion"

        /**
         * `QWEN_COMPANION_LIB` when set, else null: the binding's lookup then takes a folder of
         * `-Djna.library.path` holding the library, else the library the plugin's binding jar
         * carries for this OS and CPU (copied to `<qwen home>/companion/lib/`), else system paths.
         */
        fun libraryPath(): String? {
            val env = System.getenv(QwenCompanionLibrary.ENV_VAR)
            return if (env != null && env.isNotBlank()) env else null
        }
    }
}
