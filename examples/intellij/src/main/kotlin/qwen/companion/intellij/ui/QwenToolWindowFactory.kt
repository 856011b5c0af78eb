package qwen.companion.intellij.ui

import com.intellij.notification.NotificationType
import com.intellij.openapi.fileChooser.FileChooser
import com.intellij.openapi.fileChooser.FileChooserDescriptor
import com.intellij.openapi.project.DumbAware
import com.intellij.openapi.project.Project
import com.intellij.openapi.ui.Messages
import com.intellij.openapi.util.Key
import com.intellij.openapi.wm.ToolWindow
import com.intellij.openapi.wm.ToolWindowFactory
import com.intellij.openapi.wm.ToolWindowManager
import com.intellij.ui.content.ContentFactory
import qwen.companion.intellij.core.plugins.DocumentDrop
import qwen.companion.intellij.core.plugins.DropOutcome
import qwen.companion.intellij.core.plugins.FileCard
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.plugins.PluginManagerModel
import qwen.companion.intellij.core.plugins.PluginRow
import qwen.companion.intellij.sessions.SessionPicker
import java.awt.BorderLayout
import java.awt.FlowLayout
import java.awt.datatransfer.DataFlavor
import java.io.File
import javax.swing.DefaultListModel
import javax.swing.JButton
import javax.swing.JComponent
import javax.swing.JEditorPane
import javax.swing.JList
import javax.swing.JPanel
import javax.swing.JScrollPane
import javax.swing.JTabbedPane
import javax.swing.TransferHandler
import javax.swing.event.HyperlinkEvent

/**
 * The "Qwen" tool window: the plugin manager (install from a folder or
 * `.zip`, enable / disable, uninstall, the last error of a crashed or
 * disabled plugin) and the results of plugin tools (checklists, file cards
 * whose link opens the file). A file dropped anywhere on it goes to the
 * plugin whose `documentParsers` take its type; the extracted text can be
 * sent to a Qwen session.
 */
class QwenToolWindowFactory : ToolWindowFactory, DumbAware {
    override fun createToolWindowContent(project: Project, toolWindow: ToolWindow) {
        val ui = QwenPanel(project)
        val content = ContentFactory.getInstance().createContent(ui.root, "", false)
        content.putUserData(PANEL, ui)
        toolWindow.contentManager.addContent(content)
        ui.refresh()
    }

    companion object {
        const val ID = "Qwen"
        private val PANEL: Key<QwenPanel> = Key.create("qwen.companion.panel")

        /** Shows [html] in the Results tab of [project]'s Qwen tool window (UI thread). */
        fun showResult(project: Project, html: String) {
            val tw = ToolWindowManager.getInstance(project).getToolWindow(ID) ?: return
            val content = tw.contentManager.contents.firstOrNull() ?: return
            content.getUserData(PANEL)?.showResult(html)
        }
    }
}

private class QwenPanel(private val project: Project) {
    private val rows = DefaultListModel<String>()
    private val list = JList(rows)
    private var current: List<PluginRow> = emptyList()
    private val details = JEditorPane("text/html", "")
    private val results = JEditorPane("text/html", "<html><body>Run a plugin command (Tools | Qwen Code), or drop a file here.</body></html>")
    private val tabs = JTabbedPane()
    val root = JPanel(BorderLayout())

    init {
        details.isEditable = false
        results.isEditable = false
        results.addHyperlinkListener { e ->
            if (e.eventType == HyperlinkEvent.EventType.ACTIVATED) {
                val url = e.url
                if (url != null && url.protocol == "file") PluginRunner.openFile(project, FileCard(File(url.toURI()).path, ""))
            }
        }
        val buttons = JPanel(FlowLayout(FlowLayout.LEFT))
        buttons.add(button("Install…") { install() })
        buttons.add(button("Enable") { selected()?.let { r -> manage { it.setEnabled(r.id, true) } } })
        buttons.add(button("Disable") { selected()?.let { r -> manage { it.setEnabled(r.id, false) } } })
        buttons.add(button("Uninstall") { selected()?.let { uninstall(it) } })
        buttons.add(button("Refresh") { refresh() })
        list.addListSelectionListener { showDetails() }
        val plugins = JPanel(BorderLayout())
        plugins.add(buttons, BorderLayout.NORTH)
        plugins.add(JScrollPane(list), BorderLayout.CENTER)
        plugins.add(JScrollPane(details), BorderLayout.SOUTH)
        tabs.addTab("Plugins", plugins)
        tabs.addTab("Results", JScrollPane(results))
        root.add(tabs, BorderLayout.CENTER)
        val drop = DropHandler()
        for (c in listOf<JComponent>(root, list, results, details)) c.transferHandler = drop
    }

    private fun button(text: String, action: () -> Unit): JButton = JButton(text).also { b -> b.addActionListener { action() } }

    private fun selected(): PluginRow? = current.getOrNull(list.selectedIndex)

    private fun manager(): PluginManagerModel? {
        val m = QwenPluginUi.getInstance().model()
        if (m == null) PluginRunner.notify(project, "Qwen Code plugins are off", Html.escape(QwenPluginHostStatus.why()), NotificationType.WARNING)
        return m?.manager
    }

    /** Re-reads the installed plugins (off the UI thread). */
    fun refresh() {
        QwenPluginUi.pooled {
            val mgr = manager() ?: return@pooled
            val r = try {
                mgr.rows()
            } catch (e: qwen.companion.QwenCompanionException) {
                QwenPluginUi.onEdt { details.text = "<html><body>Cannot list the plugins: ${Html.escape(e.message ?: "")}</body></html>" }
                return@pooled
            }
            QwenPluginUi.onEdt {
                current = r
                rows.clear()
                for (row in r) rows.addElement(row.describe())
                showDetails()
            }
        }
    }

    private fun showDetails() {
        val r = selected()
        details.text = if (r == null) "<html><body>${current.size} plugin(s) installed.</body></html>" else {
            "<html><body><b>${Html.escape(r.name)}</b> ${Html.escape(r.version)} (${Html.escape(r.id)}) — " + (if (!r.enabled) "disabled" else if (r.stoppedByCrashes) "stopped after crashes: Enable restarts it" else "enabled") +
                (if (r.broken != null) "<br>Broken: ${Html.escape(r.broken)}" else "") +
                (if (r.lastError != null) "<br>Last error: ${Html.escape(r.lastError)}" else "") + "</body></html>"
        }
    }

    /** Runs a manager operation off the UI thread, reports it, reloads the contributions and the list. */
    private fun manage(op: (PluginManagerModel) -> qwen.companion.intellij.core.plugins.ManagerResult) {
        QwenPluginUi.pooled {
            val mgr = manager() ?: return@pooled
            val r = op(mgr)
            QwenPluginUi.getInstance().model()?.reload()
            QwenPluginUi.onEdt {
                PluginRunner.notify(project, if (r.ok) "Qwen Code plugins" else "Qwen Code plugins: failed",
                    Html.escape(r.message).replace("\n", "<br>"), if (r.ok) NotificationType.INFORMATION else NotificationType.ERROR)
                refresh()
            }
        }
    }

    private fun install() {
        // A plugin folder, or a .zip (an archive is chosen as a file, not opened).
        val descriptor = FileChooserDescriptor(true, true, true, true, false, false)
        descriptor.title = "Install a Qwen Code plugin (folder or .zip)"
        val vf = FileChooser.chooseFile(descriptor, project, null) ?: return
        val path = vf.path.removeSuffix("!/")
        manage { it.install(path) }
    }

    private fun uninstall(r: PluginRow) {
        val answer = Messages.showYesNoCancelDialog(project, "Uninstall ${r.name}? Its data folder can be kept for a later re-install.",
            "Uninstall Plugin", "Uninstall, Keep Data", "Uninstall, Remove Data", "Cancel", Messages.getQuestionIcon())
        if (answer == Messages.CANCEL) return
        manage { it.uninstall(r.id, answer == Messages.NO) }
    }

    fun showResult(html: String) {
        results.text = html
        tabs.selectedIndex = 1
    }

    private inner class DropHandler : TransferHandler() {
        override fun canImport(support: TransferSupport): Boolean = support.isDataFlavorSupported(DataFlavor.javaFileListFlavor)

        override fun importData(support: TransferSupport): Boolean {
            if (!canImport(support)) return false
            @Suppress("UNCHECKED_CAST")
            val files = try {
                support.transferable.getTransferData(DataFlavor.javaFileListFlavor) as List<File>
            } catch (e: Exception) {
                return false
            }
            val model = QwenPluginUi.getInstance().model() ?: return false
            QwenPluginUi.pooled {
                for (f in files) {
                    val outcome = DocumentDrop.handle(f, model.contributions, model.backend)
                    QwenPluginUi.onEdt { showDrop(outcome) }
                }
            }
            return true
        }
    }

    private fun showDrop(o: DropOutcome) {
        if (o is DropOutcome.Parsed) {
            showResult("<html><body><p>${Html.escape(o.message())}</p><pre>${Html.escape(o.text)}</pre></body></html>")
            PluginRunner.notify(project, "Qwen: ${o.file.name} parsed", Html.escape(o.message()), NotificationType.INFORMATION, "Send to session…") {
                SessionPicker.pickAndSend(project, "Send ${o.file.name} to a Qwen session", "${o.file.name}:\n\n${o.text}")
            }
        } else {
            PluginRunner.notify(project, "Qwen: ${o.file.name}", Html.escape(o.message()), NotificationType.WARNING)
        }
    }
}
