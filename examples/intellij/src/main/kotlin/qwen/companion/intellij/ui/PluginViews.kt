package qwen.companion.intellij.ui

import com.intellij.ide.BrowserUtil
import com.intellij.openapi.Disposable
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.service
import com.intellij.openapi.project.Project
import com.intellij.openapi.ui.popup.JBPopupFactory
import com.intellij.openapi.util.Disposer
import com.intellij.openapi.wm.ToolWindow
import com.intellij.openapi.wm.ToolWindowAnchor
import com.intellij.openapi.wm.ToolWindowManager
import com.intellij.openapi.wm.ex.ToolWindowManagerListener
import com.intellij.ui.content.ContentFactory
import com.intellij.ui.jcef.JBCefApp
import com.intellij.ui.jcef.JBCefBrowser
import qwen.companion.QwenCompanionException
import qwen.companion.intellij.core.plugins.Contributions
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.plugins.PluginPanel
import qwen.companion.intellij.core.plugins.PluginView
import java.awt.BorderLayout
import java.awt.Dimension
import java.util.function.Supplier
import javax.swing.JButton
import javax.swing.JComponent
import javax.swing.JLabel
import javax.swing.JPanel

/**
 * The tool windows of one project's plugin views: one per `views[]` entry of
 * every enabled plugin (right side, titled by the view), whose content is a
 * JCEF browser on the view's URL from the library's view server, loaded when
 * the window is first shown. Without JCEF the window offers the page in the
 * default browser. A view of a plugin that was disabled or uninstalled loses
 * its window. Disposed (browsers closed) with the project.
 */
@Service(Service.Level.PROJECT)
class PluginViews(private val project: Project) : Disposable {
    private val windows = LinkedHashMap<String, PluginView>() // tool window id -> view
    private val loaded = HashSet<String>()
    /** Per window: what its page holds (the JCEF browser), disposed with the window. */
    private val holders = HashMap<String, Disposable>()
    private var listening = false

    /** Registers / unregisters tool windows to match [c] (UI thread). */
    fun sync(c: Contributions) {
        if (project.isDisposed) return
        val twm = ToolWindowManager.getInstance(project)
        if (!listening) {
            listening = true
            project.messageBus.connect(this).subscribe(ToolWindowManagerListener.TOPIC, object : ToolWindowManagerListener {
                override fun toolWindowShown(toolWindow: ToolWindow) {
                    val v = windows[toolWindow.id] ?: return
                    load(toolWindow, v, null)
                }
            })
        }
        val wanted = c.views.associateBy { it.toolWindowId }
        for (id in ArrayList(windows.keys)) {
            if (!wanted.containsKey(id)) {
                twm.unregisterToolWindow(id)
                windows.remove(id)
                loaded.remove(id)
                holders.remove(id)?.let { Disposer.dispose(it) }
            }
        }
        for ((id, v) in wanted) {
            if (windows.containsKey(id)) continue
            twm.registerToolWindow(id) {
                anchor = ToolWindowAnchor.RIGHT
                canCloseContent = false
                stripeTitle = Supplier { v.title }
            }
            windows[id] = v
        }
    }

    /** Shows [view]'s tool window (from a notification: [url] is the page the host named). */
    fun open(view: PluginView, url: String?) {
        val tw = ToolWindowManager.getInstance(project).getToolWindow(view.toolWindowId) ?: return
        tw.show(null)
        load(tw, view, url)
    }

    private fun load(tw: ToolWindow, view: PluginView, url: String?) {
        if (!loaded.add(tw.id)) return
        val model = QwenPluginUi.getInstance().model()
        QwenPluginUi.pooled {
            val page = try {
                url ?: model?.viewUrl(view) ?: throw IllegalStateException(QwenPluginHostStatus.why())
            } catch (e: Exception) {
                if (e !is QwenCompanionException && e !is IllegalStateException) throw e
                QwenPluginUi.onEdt {
                    loaded.remove(tw.id) // the next show tries again
                    if (!project.isDisposed) show(tw, message("The view cannot be shown: ${e.message}"))
                }
                return@pooled
            }
            QwenPluginUi.onEdt {
                if (project.isDisposed || !windows.containsKey(tw.id)) return@onEdt
                holders.remove(tw.id)?.let { Disposer.dispose(it) }
                val holder = Disposer.newDisposable("qwen view ${tw.id}")
                Disposer.register(this, holder)
                holders[tw.id] = holder
                show(tw, page(page, holder))
            }
        }
    }

    private fun show(tw: ToolWindow, component: JComponent) {
        val cm = tw.contentManager
        cm.removeAllContents(true)
        cm.addContent(ContentFactory.getInstance().createContent(component, "", false))
    }

    override fun dispose() {
        windows.clear()
        holders.clear() // registered with this service: the platform disposes them
    }

    companion object {
        fun getInstance(project: Project): PluginViews = project.service<PluginViews>()

        /** A page of the view server: JCEF when the IDE has it, else a button that opens the default browser. */
        fun page(url: String, parent: Disposable): JComponent {
            if (JBCefApp.isSupported()) {
                val browser = JBCefBrowser(url)
                Disposer.register(parent, browser)
                return browser.component
            }
            val p = JPanel(BorderLayout())
            p.add(JLabel("<html>This IDE runs without JCEF; the page opens in your browser.</html>"), BorderLayout.CENTER)
            val b = JButton("Open in browser")
            b.addActionListener { BrowserUtil.browse(url) }
            p.add(b, BorderLayout.SOUTH)
            return p
        }

        fun message(text: String): JComponent = JLabel("<html>" + Html.escape(text) + "</html>")

        /** The plugin's `ui` panel as a floating popup (JCEF) over the IDE window. */
        fun openPanel(project: Project, panel: PluginPanel) {
            val model = QwenPluginUi.getInstance().model() ?: return
            QwenPluginUi.pooled {
                val url = try {
                    model.panelUrl(panel)
                } catch (e: QwenCompanionException) {
                    QwenPluginUi.onEdt { PluginRunner.notify(project, panel.title, Html.escape(e.message ?: ""), com.intellij.notification.NotificationType.WARNING) }
                    return@pooled
                }
                QwenPluginUi.onEdt {
                    if (project.isDisposed) return@onEdt
                    val holder = Disposer.newDisposable("qwen panel ${panel.pluginId}")
                    val content = page(url, holder)
                    content.preferredSize = Dimension(480, 600)
                    val popup = JBPopupFactory.getInstance().createComponentPopupBuilder(content, content)
                        .setTitle(panel.title)
                        .setResizable(true)
                        .setMovable(true)
                        .setRequestFocus(true)
                        .createPopup()
                    Disposer.register(popup, holder)
                    popup.showCenteredInCurrentWindow(project)
                }
            }
        }
    }
}
