package qwen.companion.intellij.sessions

import com.intellij.openapi.options.Configurable
import com.intellij.openapi.options.ConfigurationException
import com.intellij.openapi.project.Project
import qwen.companion.intellij.core.sessions.InboxPolicy
import java.awt.FlowLayout
import javax.swing.BoxLayout
import javax.swing.JComboBox
import javax.swing.JComponent
import javax.swing.JLabel
import javax.swing.JPanel

/**
 * Settings | Tools | Qwen Code Sessions (per project): the inbox policy of
 * the project's participant — `default` (the library's mode parity: a
 * session reviewing its actions may send freely, others are held), `accept`,
 * `hold` (every message waits in "Qwen messages" for Release / Deny) or
 * `refuse`. The participant's name is the "Participant name" of
 * Settings | Tools | Qwen Code Companion (default `intellij-<project>`);
 * applying here also re-registers under a changed name.
 */
class QwenSessionsConfigurable(private val project: Project) : Configurable {
    private val combo = JComboBox(InboxPolicy.values().map { it.setting }.toTypedArray())

    override fun getDisplayName(): String = "Qwen Code Sessions"

    override fun createComponent(): JComponent {
        val root = JPanel()
        root.layout = BoxLayout(root, BoxLayout.Y_AXIS)
        val row = JPanel(FlowLayout(FlowLayout.LEFT))
        row.add(JLabel("Inbox policy:"))
        row.add(combo)
        root.add(row)
        root.add(JLabel("Registered as: ${QwenParticipantService.getInstance(project).participant.settings.name}"))
        reset()
        return root
    }

    private fun chosen(): InboxPolicy = InboxPolicy.of(combo.selectedItem as? String)

    override fun isModified(): Boolean = chosen() != QwenParticipantService.getInstance(project).policy()

    override fun apply() {
        val service = QwenParticipantService.getInstance(project)
        val err = service.setPolicy(chosen())
        if (err != null) throw ConfigurationException("The inbox policy was saved but not applied: $err")
        service.reconfigure()
        service.refresh()
    }

    override fun reset() {
        combo.selectedItem = QwenParticipantService.getInstance(project).policy().setting
    }
}
