package qwen.companion.intellij.ui

import com.intellij.ide.BrowserUtil
import com.intellij.ide.ui.LafManagerListener
import com.intellij.openapi.Disposable
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.service
import com.intellij.openapi.diagnostic.Logger
import com.intellij.openapi.diagnostic.logger
import com.intellij.openapi.project.ProjectManager
import com.intellij.ui.JBColor
import qwen.companion.QwenCompanionException
import qwen.companion.intellij.QwenPluginHostService
import qwen.companion.intellij.core.plugins.Contributions
import qwen.companion.intellij.core.plugins.HostBackend
import qwen.companion.intellij.core.plugins.PluginUiModel
import qwen.companion.intellij.core.plugins.ViewServer

/**
 * The plugin UI of the IDE-wide plugin host ([QwenPluginHostService]): the
 * contributions of the enabled plugins become actions (with the manifest's
 * keybindings in the active keymap), menu entries, tool windows for views, and
 * the host's `views_changed` / `plugin_disabled` events refresh them. A
 * notification's "Open" action opens the view's tool window.
 */
@Service(Service.Level.APP)
class QwenPluginUi : Disposable {
    private val log: Logger = logger<QwenPluginUi>()
    private val lock = Any()
    @Volatile private var model: PluginUiModel? = null
    private val themeListener = java.util.concurrent.atomic.AtomicBoolean(false)

    /** The model over the running host (rebuilt when the host was restarted); null when the host is off or failing. */
    fun model(): PluginUiModel? {
        val svc = QwenPluginHostService.getInstance()
        val host = svc.host() ?: return null
        val fresh: PluginUiModel
        synchronized(lock) {
            val m = model
            if (m != null && (m.backend as HostBackend).host === host) return m
            fresh = PluginUiModel(HostBackend(host))
            fresh.addListener { c -> onEdt { apply(c) } }
            model = fresh
        }
        svc.manager()?.addEventListener { e ->
            if (model === fresh && PluginUiModel.reloads(e)) pooled { fresh.onHostEvent(e) }
        }
        svc.viewOpener = { pluginId, view -> openFromNotification(pluginId, view) }
        if (themeListener.compareAndSet(false, true)) {
            // Open pages follow the IDE's theme (window.pluginHost.onColorSchemeChange).
            ApplicationManager.getApplication().messageBus.connect(this).subscribe(LafManagerListener.TOPIC, LafManagerListener {
                val h = (model?.backend as? HostBackend)?.host
                if (h != null) pooled { setScheme(h) }
            })
        }
        pooled {
            fresh.reload()
            fresh.lastReloadError?.let { log.warn("qwen-companion: cannot list plugins: $it", null) }
            setScheme(host)
        }
        return fresh
    }

    private fun setScheme(host: qwen.companion.QwenPluginHost) {
        try {
            ViewServer.setColorScheme(host, !JBColor.isBright())
        } catch (e: QwenCompanionException) {
            log.info("qwen-companion: no view server: ${e.message}")
        }
    }

    /** The current contributions (empty before the first list). */
    fun contributions(): Contributions = model?.contributions ?: Contributions.EMPTY

    private fun apply(c: Contributions) {
        PluginActions.sync(c)
        for (p in ProjectManager.getInstance().openProjects) {
            if (!p.isDisposed) PluginViews.getInstance(p).sync(c)
        }
    }

    /** A notification's "Open": the view's tool window, else (unknown view, no project) the page in the browser. */
    private fun openFromNotification(pluginId: String, view: Map<String, Any?>) {
        val url = view["url"] as? String
        val v = (view["id"] as? String)?.let { model?.findView(pluginId, it) }
        val project = ProjectManager.getInstance().openProjects.firstOrNull { !it.isDisposed }
        if (v == null || project == null) {
            if (url != null) BrowserUtil.browse(url)
            return
        }
        onEdt { PluginViews.getInstance(project).open(v, url) }
    }

    override fun dispose() {
        model = null
    }

    companion object {
        fun getInstance(): QwenPluginUi = service<QwenPluginUi>()

        fun pooled(body: () -> Unit) {
            ApplicationManager.getApplication().executeOnPooledThread(Runnable { body() })
        }

        fun onEdt(body: () -> Unit) {
            ApplicationManager.getApplication().invokeLater(Runnable { body() }, ModalityState.any())
        }
    }
}
