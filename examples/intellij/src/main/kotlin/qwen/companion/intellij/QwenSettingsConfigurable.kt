package qwen.companion.intellij

import com.intellij.openapi.options.Configurable
import com.intellij.openapi.options.ConfigurationException
import com.intellij.openapi.project.ProjectManager
import com.intellij.openapi.components.service
import qwen.companion.CompanionCli
import qwen.companion.intellij.core.CompanionOptions
import qwen.companion.intellij.core.OptionsForm
import java.awt.GridBagConstraints
import java.awt.GridBagLayout
import java.awt.Insets
import javax.swing.JCheckBox
import javax.swing.JComboBox
import javax.swing.JComponent
import javax.swing.JLabel
import javax.swing.JPanel
import javax.swing.JTextField

/**
 * Settings | Tools | Qwen Code Companion: the options the companion and
 * the plugin host take ([CompanionOptions]; parsed and checked by
 * [OptionsForm]). Applying restarts the plugin host when its options
 * changed, starts or stops the projects' companions when "enabled"
 * changed, and restarts the running companions when the CLIs to serve or a
 * timing option changed ([CompanionOptions.companionChanged]).
 */
class QwenSettingsConfigurable : Configurable {
    private var panel: JPanel? = null
    private val enabled = JCheckBox("Start a Qwen Code companion for every project")
    private val runCommand = JTextField(24)
    private val cli = JComboBox(CLI_LABELS.toTypedArray())
    private val geminiCommand = JTextField(24)
    private val debounce = JTextField(8)
    private val maxWait = JTextField(8)
    private val requestTimeout = JTextField(8)
    private val pluginHost = JCheckBox("Run the plugin host (plugin tools in Qwen Code)")
    private val pluginsDir = JTextField(24)
    private val registerMcp = JCheckBox("Register qwen-companion-plugins in ~/.qwen/settings.json")
    private val alwaysLoad = JCheckBox("Ask Qwen Code to load every plugin tool up front")
    private val participant = JTextField(16)

    override fun getDisplayName(): String = "Qwen Code Companion"

    override fun createComponent(): JComponent {
        val p = JPanel(GridBagLayout())
        var row = 0
        fun add(label: String?, field: JComponent) {
            val c = GridBagConstraints()
            c.gridy = row++
            c.anchor = GridBagConstraints.WEST
            c.insets = Insets(2, 0, 2, 8)
            if (label != null) {
                c.gridx = 0
                p.add(JLabel(label), c)
                c.gridx = 1
            } else {
                c.gridx = 0
                c.gridwidth = 2
            }
            p.add(field, c)
        }
        add(null, enabled)
        add("CLIs to serve:", cli)
        add("Run Qwen Code command:", runCommand)
        add("Run Gemini CLI command:", geminiCommand)
        add("Context debounce (ms, blank = 50):", debounce)
        add("Context max wait (ms, blank = 200):", maxWait)
        add("Diff request timeout (ms):", requestTimeout)
        add(null, pluginHost)
        add("Plugins directory (blank = ~/.qwen/companion/plugins):", pluginsDir)
        add(null, registerMcp)
        add(null, alwaysLoad)
        add("Messaging participant name (blank = intellij-<project>):", participant)
        panel = p
        reset()
        return p
    }

    private fun form() = OptionsForm(
        enabled = enabled.isSelected,
        runCommand = runCommand.text,
        debounceMs = debounce.text,
        maxWaitMs = maxWait.text,
        requestTimeoutMs = requestTimeout.text,
        pluginHostEnabled = pluginHost.isSelected,
        pluginsDir = pluginsDir.text,
        registerMcp = registerMcp.isSelected,
        alwaysLoadTools = alwaysLoad.isSelected,
        participantName = participant.text,
        cli = CLI_VALUES[Math.max(0, cli.selectedIndex)],
        geminiCommand = geminiCommand.text
    )

    override fun isModified(): Boolean = form() != OptionsForm.of(QwenSettings.getInstance().options)

    override fun apply() {
        val parsed = form().parse()
        val options = parsed.options ?: throw ConfigurationException(parsed.problems.joinToString("\n"), "Qwen Code Companion")
        val settings = QwenSettings.getInstance()
        val before = settings.options
        settings.update(options)
        if (before.pluginHostChanged(options)) QwenPluginHostService.getInstance().restart()
        if (before.enabled != options.enabled) {
            for (project in ProjectManager.getInstance().openProjects) {
                val service = project.service<QwenCompanionService>()
                if (options.enabled) service.startInBackground() else service.stop()
            }
        } else if (options.enabled && before.companionChanged(options)) {
            for (project in ProjectManager.getInstance().openProjects) project.service<QwenCompanionService>().restart()
        }
    }

    override fun reset() {
        val f = OptionsForm.of(QwenSettings.getInstance().options)
        enabled.isSelected = f.enabled
        runCommand.text = f.runCommand
        debounce.text = f.debounceMs
        maxWait.text = f.maxWaitMs
        requestTimeout.text = f.requestTimeoutMs
        pluginHost.isSelected = f.pluginHostEnabled
        pluginsDir.text = f.pluginsDir
        registerMcp.isSelected = f.registerMcp
        alwaysLoad.isSelected = f.alwaysLoadTools
        participant.text = f.participantName
        cli.selectedIndex = CLI_VALUES.indexOf(f.cli)
        geminiCommand.text = f.geminiCommand
    }

    override fun disposeUIResources() {
        panel = null
    }

    companion object {
        /** The choices of "CLIs to serve", in the order of [CLI_LABELS]. */
        private val CLI_VALUES = listOf(CompanionCli.QWEN, CompanionCli.GEMINI, CompanionCli.BOTH)
        private val CLI_LABELS = listOf("Qwen Code", "Gemini CLI", "Both")
    }
}
