package qwen.companion.intellij.ui

import com.intellij.openapi.actionSystem.ActionManager
import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnAction
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.actionSystem.DefaultActionGroup
import com.intellij.openapi.actionSystem.KeyboardShortcut
import com.intellij.openapi.diagnostic.logger
import com.intellij.openapi.keymap.KeymapManager
import com.intellij.openapi.project.DumbAwareAction
import qwen.companion.intellij.core.plugins.Contributions
import qwen.companion.intellij.core.plugins.Keybindings
import qwen.companion.intellij.core.plugins.MenuPlacement
import qwen.companion.intellij.core.plugins.PluginSessionAction
import javax.swing.KeyStroke

/** Runs one plugin tool for the project of the event (a command, a menu entry or the session action). */
class PluginToolAction(
    val pluginId: String,
    val tool: String,
    title: String,
    description: String?,
    /** Non-null for the session action: shown only where its `visibleTool` says so. */
    private val sessionAction: PluginSessionAction? = null
) : DumbAwareAction(title, description, null) {

    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        PluginRunner.run(project, pluginId, tool)
    }

    override fun update(e: AnActionEvent) {
        val sa = sessionAction ?: return
        val project = e.project
        val cwd = project?.basePath
        val model = QwenPluginUi.getInstance().model()
        if (cwd == null || model == null) {
            e.presentation.isEnabledAndVisible = false
            return
        }
        val cached = model.cachedVisible(sa, cwd)
        // Unknown: hidden now, probed off the update thread; the next update shows the answer.
        if (cached == null) QwenPluginUi.pooled { model.sessionActionVisible(sa, cwd) }
        e.presentation.isEnabledAndVisible = cached == true
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}

/**
 * Registers the actions of the plugins' `commands`, `menus` and
 * `sessionAction` with the IDE (and removes those of plugins that went
 * away): commands under Tools | Qwen Code | Plugin Commands with their
 * keybinding (`mod` = Cmd on macOS, Ctrl elsewhere) in the active keymap,
 * `session/context` entries and session actions under Tools | Qwen Code |
 * Session. Runs on the UI thread.
 */
object PluginActions {
    const val SESSION_ACTIONS_GROUP = MenuPlacement.SESSION_CONTEXT_GROUP
    private val registered = LinkedHashMap<String, String>() // action id -> group id
    private val isMac = Keybindings.isMac(System.getProperty("os.name"))

    fun sync(c: Contributions) {
        val am = ActionManager.getInstance()
        val keymap = KeymapManager.getInstance().activeKeymap
        for ((id, group) in registered) {
            val a = am.getAction(id)
            if (a != null) (am.getAction(group) as? DefaultActionGroup)?.remove(a)
            keymap.removeAllActionShortcuts(id)
            am.unregisterAction(id)
        }
        registered.clear()
        fun add(id: String, action: AnAction, group: String) {
            if (registered.containsKey(id)) return
            am.registerAction(id, action)
            (am.getAction(group) as? DefaultActionGroup)?.add(action)
            registered[id] = group
        }
        for (cmd in c.commands) {
            add(cmd.actionId, PluginToolAction(cmd.pluginId, cmd.tool, cmd.title, "${cmd.pluginName}: ${cmd.title}"), MenuPlacement.PLUGINS_GROUP)
            val key = cmd.key ?: continue
            try {
                val stroke = KeyStroke.getKeyStroke(Keybindings.parse(key, isMac).awt())
                    ?: throw IllegalArgumentException("the platform has no key stroke for '$key'")
                // Never take a key the keymap already gives to another action.
                val taken = keymap.getActionIds(stroke).filter { it != cmd.actionId }
                if (taken.isNotEmpty()) throw IllegalArgumentException("'$key' is already bound to ${taken.joinToString()}")
                keymap.addShortcut(cmd.actionId, KeyboardShortcut(stroke, null))
            } catch (e: IllegalArgumentException) {
                logger<PluginActions>().warn("qwen-companion: ${cmd.pluginId}: keybinding ignored: ${e.message}", null)
            }
        }
        for ((location, items) in c.menus) {
            for (i in items) add(i.actionId, PluginToolAction(i.pluginId, i.tool, i.title, null), MenuPlacement.groupFor(location))
        }
        for (sa in c.sessionActions) add(sa.actionId, PluginToolAction(sa.pluginId, sa.tool, sa.tooltip, sa.pluginName, sa), SESSION_ACTIONS_GROUP)
    }
}
