package qwen.companion.intellij.sessions

import com.intellij.notification.NotificationType
import com.intellij.openapi.fileEditor.OpenFileDescriptor
import com.intellij.openapi.project.DumbAware
import com.intellij.openapi.project.Project
import com.intellij.openapi.ui.popup.JBPopupFactory
import com.intellij.openapi.vfs.LocalFileSystem
import com.intellij.openapi.wm.ToolWindow
import com.intellij.openapi.wm.ToolWindowFactory
import com.intellij.ui.content.ContentFactory
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.sessions.HeldMessage
import qwen.companion.intellij.core.sessions.PathLine
import qwen.companion.intellij.core.sessions.ReceivedMessage
import qwen.companion.intellij.ui.PluginRunner
import qwen.companion.intellij.ui.QwenPluginUi
import java.awt.BorderLayout
import java.awt.FlowLayout
import java.awt.GridLayout
import java.awt.event.MouseAdapter
import java.awt.event.MouseEvent
import java.text.SimpleDateFormat
import java.util.Date
import javax.swing.BorderFactory
import javax.swing.DefaultListModel
import javax.swing.JButton
import javax.swing.JLabel
import javax.swing.JList
import javax.swing.JPanel
import javax.swing.JScrollPane

/**
 * The "Qwen messages" tool window: messages sessions sent to the editor
 * (sender, origin, the library's neutralised text; "Open path:line" or a
 * double click opens the place a message names), the held messages with
 * Release / Deny, and what the editor sent with its receipt state.
 */
class QwenMessagesToolWindowFactory : ToolWindowFactory, DumbAware {
    override fun createToolWindowContent(project: Project, toolWindow: ToolWindow) {
        val panel = QwenMessagesPanel(project)
        toolWindow.contentManager.addContent(ContentFactory.getInstance().createContent(panel.root, "", false))
        QwenParticipantService.getInstance(project).addRefresher { panel.refresh() }
        panel.refresh()
    }

    companion object {
        const val ID = "Qwen messages"
    }
}

class QwenMessagesPanel(private val project: Project) {
    private val service = QwenParticipantService.getInstance(project)
    private val receivedModel = DefaultListModel<String>()
    private val heldModel = DefaultListModel<String>()
    private val sentModel = DefaultListModel<String>()
    private val receivedList = JList(receivedModel)
    private val heldList = JList(heldModel)
    private val sentList = JList(sentModel)
    private val status = JLabel()
    private var received: List<ReceivedMessage> = emptyList()
    private var held: List<HeldMessage> = emptyList()
    val root = JPanel(BorderLayout())

    init {
        val top = JPanel(FlowLayout(FlowLayout.LEFT))
        top.add(status)
        top.add(button("Send…") { SessionPicker.pickAndSend(project, "Send a message to", "") })
        top.add(button("Open path:line") { received.getOrNull(receivedList.selectedIndex)?.let { openPlaces(it) } })
        top.add(button("Release") { decide(true) })
        top.add(button("Deny") { decide(false) })
        receivedList.addMouseListener(object : MouseAdapter() {
            override fun mouseClicked(e: MouseEvent) {
                if (e.clickCount == 2) received.getOrNull(receivedList.selectedIndex)?.let { openPlaces(it) }
            }
        })
        val lists = JPanel(GridLayout(3, 1))
        lists.add(titled("Received", JScrollPane(receivedList)))
        lists.add(titled("Held for review", JScrollPane(heldList)))
        lists.add(titled("Sent", JScrollPane(sentList)))
        root.add(top, BorderLayout.NORTH)
        root.add(lists, BorderLayout.CENTER)
    }

    private fun button(text: String, action: () -> Unit): JButton = JButton(text).also { b -> b.addActionListener { action() } }

    private fun titled(title: String, c: javax.swing.JComponent): JPanel {
        val p = JPanel(BorderLayout())
        p.border = BorderFactory.createTitledBorder(title)
        p.add(c, BorderLayout.CENTER)
        return p
    }

    /** Re-reads the participant's lists (UI thread). */
    fun refresh() {
        val p = service.participant
        val name = p.settings.name
        status.text = if (p.isRunning) "$name — inbox policy ${p.settings.policy.setting}" else "$name — not registered" + (p.lastError?.let { ": $it" } ?: "")
        val now = System.currentTimeMillis()
        val time = SimpleDateFormat("HH:mm:ss")
        received = p.messages().reversed()
        receivedModel.clear()
        // The library's text has every '<' escaped: it is safe as HTML.
        for (m in received) receivedModel.addElement("<html>${time.format(Date(m.receivedAt))} <b>${Html.escape(m.sender())}</b>: ${m.text}" +
            (if (m.places.isEmpty()) "" else " <i>[${Html.escape(m.places.joinToString(", "))}]</i>") + "</html>")
        held = p.held()
        heldModel.clear()
        for (h in held) heldModel.addElement(h.describe(now))
        sentModel.clear()
        for (s in p.receipts.all()) sentModel.addElement(s.describe())
    }

    private fun decide(release: Boolean) {
        val h = held.getOrNull(heldList.selectedIndex) ?: return
        QwenPluginUi.pooled {
            val err = if (release) service.participant.release(h.msgId) else service.participant.deny(h.msgId)
            if (err != null) QwenPluginUi.onEdt { PluginRunner.notify(project, "Qwen: cannot ${if (release) "release" else "deny"}", Html.escape(err), NotificationType.WARNING) }
            service.refresh()
        }
    }

    private fun openPlaces(m: ReceivedMessage) {
        when (m.places.size) {
            0 -> return
            1 -> open(project, m.places[0])
            else -> {
                val labels = m.places.map { it.toString() }
                JBPopupFactory.getInstance().createPopupChooserBuilder(labels)
                    .setTitle("Open")
                    .setItemChosenCallback { l -> m.places.getOrNull(labels.indexOf(l))?.let { open(project, it) } }
                    .createPopup()
                    .showCenteredInCurrentWindow(project)
            }
        }
    }

    companion object {
        /** Opens [place] in the editor at its line (and column). */
        fun open(project: Project, place: PathLine) {
            val vf = LocalFileSystem.getInstance().refreshAndFindFileByPath(place.path)
            if (vf == null) {
                PluginRunner.notify(project, "Qwen: no such file", Html.escape(place.path), NotificationType.WARNING)
                return
            }
            OpenFileDescriptor(project, vf, place.line - 1, (place.column ?: 1) - 1).navigate(true)
        }
    }
}
