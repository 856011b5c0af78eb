package qwen.companion.intellij.sessions

import com.intellij.notification.NotificationType
import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.actionSystem.CommonDataKeys
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.project.DumbAwareAction
import com.intellij.openapi.project.Project
import com.intellij.openapi.startup.ProjectActivity
import com.intellij.openapi.ui.Messages
import com.intellij.openapi.ui.popup.JBPopupFactory
import com.intellij.openapi.wm.ToolWindowManager
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.sessions.OutgoingText
import qwen.companion.intellij.core.sessions.SessionRow
import qwen.companion.intellij.ui.PluginRunner
import qwen.companion.intellij.ui.PluginViews
import qwen.companion.intellij.ui.QwenPluginUi

/** Registers the project's participant and the plugin UI when a project opens (off the UI thread). */
class QwenSessionsStartup : ProjectActivity {
    override suspend fun execute(project: Project) {
        QwenParticipantService.getInstance(project).start()
        val ui = QwenPluginUi.getInstance()
        if (ui.model() != null) QwenPluginUi.onEdt { if (!project.isDisposed) PluginViews.getInstance(project).sync(ui.contributions()) }
    }
}

/**
 * Picks a live session (name, ref, cwd, kind, age; a fresh registry read)
 * and sends it a message the user may edit first; the receipt state is
 * shown as balloons and in the "Qwen messages" tool window.
 */
object SessionPicker {
    fun pickAndSend(project: Project, title: String, initialText: String) {
        val service = QwenParticipantService.getInstance(project)
        QwenPluginUi.pooled {
            val rows = service.participant.sessions()
            QwenPluginUi.onEdt {
                if (project.isDisposed) return@onEdt
                if (rows.isEmpty()) {
                    val why = service.participant.lastError ?: "No other Qwen session is running on this machine (start `qwen` in a terminal)."
                    PluginRunner.notify(project, "Qwen: no session to send to", Html.escape(why), NotificationType.INFORMATION)
                    return@onEdt
                }
                val now = System.currentTimeMillis()
                val labels = rows.map { it.describe(now) }
                JBPopupFactory.getInstance().createPopupChooserBuilder(labels)
                    .setTitle(title)
                    .setItemChosenCallback { label -> rows.getOrNull(labels.indexOf(label))?.let { prompt(project, it, initialText) } }
                    .createPopup()
                    .showCenteredInCurrentWindow(project)
            }
        }
    }

    private fun prompt(project: Project, row: SessionRow, initialText: String) {
        val text = Messages.showMultilineInputDialog(project, "Message to ${row.name} [${row.ref}] (${row.cwd})", "Send to Qwen Session",
            initialText, null, null) ?: return
        send(project, row.address, text)
    }

    fun send(project: Project, address: String, text: String) {
        val service = QwenParticipantService.getInstance(project)
        QwenPluginUi.pooled {
            val m = service.participant.send(address, text)
            if (m.state == "pending" || m.state == "held") service.participant.awaitFinal(m.msgId, 15000)
            service.refresh()
        }
        ToolWindowManager.getInstance(project).getToolWindow(QwenMessagesToolWindowFactory.ID)?.show(null)
    }
}

/** Tools | Qwen Code | Sessions…: the live sessions; picking one opens the send prompt. */
class QwenSessionsAction : DumbAwareAction("Sessions…", "List the live Qwen sessions and send one a message", null) {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        SessionPicker.pickAndSend(project, "Qwen sessions", "")
    }
}

/**
 * Send Selection to Session…: the selection with its file path and line
 * range as context (an editor without a selection: a typed message).
 */
class QwenSendSelectionAction : DumbAwareAction("Send Selection to Session…", "Send the selection (with its file and lines) to a Qwen session", null) {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val editor = e.getData(CommonDataKeys.EDITOR)
        val sel = editor?.selectionModel
        val text = sel?.selectedText
        if (editor == null || sel == null || text == null || text.isEmpty()) {
            SessionPicker.pickAndSend(project, "Send a message to", "")
            return
        }
        val doc = editor.document
        val path = FileDocumentManager.getInstance().getFile(doc)?.path ?: "untitled"
        val start = doc.getLineNumber(sel.selectionStart) + 1
        // A selection ending at a line's first column does not include that line.
        val endOffset = if (sel.selectionEnd > sel.selectionStart) sel.selectionEnd - 1 else sel.selectionEnd
        val end = doc.getLineNumber(endOffset) + 1
        SessionPicker.pickAndSend(project, "Send the selection to", OutgoingText.selectionWithContext(path, start, end, text))
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}

/** Send Last Run Output to Session…: the output of the project's last run console. */
class QwenSendRunOutputAction : DumbAwareAction("Send Last Run Output to Session…", "Send the last run console's output to a Qwen session", null) {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val last = QwenParticipantService.getInstance(project).console.last()
        if (last == null) {
            PluginRunner.notify(project, "Qwen: no run output yet", "Run something first (its console output is kept here).", NotificationType.INFORMATION)
            return
        }
        SessionPicker.pickAndSend(project, "Send the output of \"${last.first}\" to", OutgoingText.consoleOutput(last.first, last.second, last.third))
    }
}

/** Tools | Qwen Code | Open Plugin Panel…: a plugin's `ui` panel as a popup. */
class QwenOpenPanelAction : DumbAwareAction("Open Plugin Panel…", "Open the floating panel of a Qwen Code plugin", null) {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val ui = QwenPluginUi.getInstance()
        if (ui.model() == null) {
            PluginRunner.notify(project, "Qwen Code plugins are off", Html.escape(qwen.companion.intellij.ui.QwenPluginHostStatus.why()), NotificationType.WARNING)
            return
        }
        val panels = ui.contributions().panels
        if (panels.isEmpty()) {
            PluginRunner.notify(project, "Qwen: no plugin panel", "No enabled plugin has a panel (manifest <code>ui</code>).", NotificationType.INFORMATION)
            return
        }
        val labels = panels.map { "${it.title} (${it.pluginName})" }
        JBPopupFactory.getInstance().createPopupChooserBuilder(labels)
            .setTitle("Plugin panels")
            .setItemChosenCallback { label -> panels.getOrNull(labels.indexOf(label))?.let { PluginViews.openPanel(project, it) } }
            .createPopup()
            .showCenteredInCurrentWindow(project)
    }
}
