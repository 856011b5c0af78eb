package qwen.companion.intellij.ui

import com.intellij.openapi.options.Configurable
import com.intellij.openapi.options.ConfigurationException
import qwen.companion.QwenCompanionException
import qwen.companion.intellij.core.plugins.ConfigForm
import qwen.companion.intellij.core.plugins.PluginConfigEntry
import qwen.companion.intellij.core.plugins.PluginUiModel
import qwen.companion.intellij.core.plugins.SelectOption
import java.awt.GridBagConstraints
import java.awt.GridBagLayout
import java.awt.Insets
import javax.swing.BorderFactory
import javax.swing.BoxLayout
import javax.swing.JCheckBox
import javax.swing.JComboBox
import javax.swing.JComponent
import javax.swing.JLabel
import javax.swing.JPanel
import javax.swing.JTextField

/**
 * Settings | Tools | Qwen Code Plugins: the `configuration` of every enabled
 * plugin. `select` entries list "Auto" (the entry's default) first, then what
 * the plugin's `optionsTool` returns (fetched in the background); `boolean`
 * is a checkbox; `string` and `number` are text fields (a number that does
 * not parse is refused with the entry's label). Values are stored by the
 * library (`state.json` of the plugins folder) and reach the plugin as
 * `context.config`.
 */
class QwenPluginsConfigurable : Configurable {
    private class Field(val entry: PluginConfigEntry, val component: JComponent) {
        var options: List<SelectOption> = emptyList()
        var initial: Any? = null
    }

    private val fields = ArrayList<Field>()
    private var model: PluginUiModel? = null

    override fun getDisplayName(): String = "Qwen Code Plugins"

    override fun createComponent(): JComponent {
        val root = JPanel()
        root.layout = BoxLayout(root, BoxLayout.Y_AXIS)
        val m = QwenPluginUi.getInstance().model()
        model = m
        fields.clear()
        if (m == null) {
            root.add(JLabel(QwenPluginHostStatus.why()))
            return root
        }
        val byPlugin = m.contributions.configuration
        if (byPlugin.isEmpty()) root.add(JLabel("No enabled plugin declares settings."))
        for ((pluginId, entries) in byPlugin) {
            val panel = JPanel(GridBagLayout())
            panel.border = BorderFactory.createTitledBorder(pluginId)
            val stored = ConfigForm.storedValues(m.backend.pluginsDir, pluginId)
            for ((row, e) in entries.withIndex()) {
                val value = ConfigForm.effective(e, stored)
                val f = when (e.type) {
                    "boolean" -> Field(e, JCheckBox("", value == true))
                    "select" -> Field(e, JComboBox<String>(arrayOf(ConfigForm.AUTO_LABEL)))
                    else -> Field(e, JTextField(ConfigForm.format(value), 24))
                }
                f.initial = value
                if (e.type == "select") loadOptions(m, f, value)
                fields.add(f)
                val c = GridBagConstraints()
                c.gridy = row
                c.insets = Insets(2, 4, 2, 4)
                c.anchor = GridBagConstraints.WEST
                c.gridx = 0
                panel.add(JLabel(e.label), c)
                c.gridx = 1
                c.fill = GridBagConstraints.HORIZONTAL
                c.weightx = 1.0
                panel.add(f.component, c)
            }
            root.add(panel)
        }
        return root
    }

    /** Fills a select with Auto + the optionsTool's options, off the UI thread. */
    private fun loadOptions(m: PluginUiModel, f: Field, value: Any?) {
        @Suppress("UNCHECKED_CAST")
        val combo = f.component as JComboBox<String>
        combo.isEnabled = false
        QwenPluginUi.pooled {
            val raw = try {
                m.backend.options(f.entry.pluginId, f.entry.id)
            } catch (e: QwenCompanionException) {
                emptyList<Map<String, Any?>>()
            }
            val options = ConfigForm.selectOptions(f.entry, raw)
            QwenPluginUi.onEdt {
                f.options = options
                combo.removeAllItems()
                for (o in options) combo.addItem(o.label)
                combo.selectedIndex = ConfigForm.indexOf(options, value)
                combo.isEnabled = true
            }
        }
    }

    /** The value a field holds now (throws IllegalArgumentException for a bad number). */
    private fun current(f: Field): Any? = when (val c = f.component) {
        is JCheckBox -> c.isSelected
        is JTextField -> ConfigForm.parse(f.entry, c.text)
        is JComboBox<*> -> if (f.options.isEmpty()) f.initial else f.options.getOrNull(c.selectedIndex)?.value ?: f.entry.defaultValue
        else -> f.initial
    }

    override fun isModified(): Boolean = fields.any { f ->
        try {
            current(f) != f.initial
        } catch (e: IllegalArgumentException) {
            true
        }
    }

    override fun apply() {
        val m = model ?: return
        val changes = ArrayList<Pair<Field, Any?>>()
        for (f in fields) {
            val v = try {
                current(f)
            } catch (e: IllegalArgumentException) {
                throw ConfigurationException(e.message ?: "invalid value")
            }
            if (v != f.initial) changes.add(Pair(f, v))
        }
        for ((f, v) in changes) {
            // The default stored as "no value": a later change of the manifest's default then applies.
            val stored = if (v == f.entry.defaultValue) null else v
            try {
                m.backend.setConfigValue(f.entry.pluginId, f.entry.id, stored)
            } catch (e: QwenCompanionException.Call) {
                throw ConfigurationException("${f.entry.pluginId} / ${f.entry.label}: ${e.detail}")
            }
            f.initial = v
        }
    }

    override fun reset() {
        for (f in fields) {
            when (val c = f.component) {
                is JCheckBox -> c.isSelected = f.initial == true
                is JTextField -> c.text = ConfigForm.format(f.initial)
                is JComboBox<*> -> if (f.options.isNotEmpty()) c.selectedIndex = ConfigForm.indexOf(f.options, f.initial)
            }
        }
    }
}
