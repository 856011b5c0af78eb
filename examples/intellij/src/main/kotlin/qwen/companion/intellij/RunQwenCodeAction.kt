package qwen.companion.intellij

import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.components.service
import com.intellij.openapi.project.DumbAwareAction
import org.jetbrains.plugins.terminal.TerminalToolWindowManager
import qwen.companion.intellij.core.RunQwen

/**
 * Tools | Run Qwen Code (Qwen.RunQwenCode): opens a tab of the IDE's
 * terminal in the project folder — its environment already carries the
 * companion's variables ([QwenTerminalCustomizer]) — and runs the command of
 * the settings (`qwen` by default). Registered with the Terminal plugin only
 * (qwen-terminal.xml).
 */
class RunQwenCodeAction : DumbAwareAction() {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val plan = RunQwen.plan(QwenSettings.getInstance().options, project.basePath)
        val app = ApplicationManager.getApplication()
        // Start the companion first (off the UI thread) so the new terminal gets its env.
        app.executeOnPooledThread {
            project.service<QwenCompanionService>().start()
            app.invokeLater({
                if (!project.isDisposed) {
                    val widget = TerminalToolWindowManager.getInstance(project)
                        .createShellWidget(plan.workingDirectory, plan.tabName, true, true)
                    widget.sendCommandToExecute(plan.command)
                }
            }, ModalityState.defaultModalityState())
        }
    }

    override fun update(e: AnActionEvent) {
        e.presentation.isEnabled = e.project != null
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}
