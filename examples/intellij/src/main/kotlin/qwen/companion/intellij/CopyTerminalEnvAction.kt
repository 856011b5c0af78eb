package qwen.companion.intellij

import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.components.service
import com.intellij.openapi.ide.CopyPasteManager
import com.intellij.openapi.project.Project
import org.jetbrains.plugins.terminal.TerminalProjectOptionsProvider
import qwen.companion.intellij.core.Served
import qwen.companion.intellij.core.TerminalEnv
import java.awt.datatransfer.StringSelection

/**
 * Tools | Copy Terminal Environment for Qwen Code (Qwen.CopyTerminalEnv):
 * copies the lines that point a `qwen` or `gemini` (the CLIs the companion
 * serves) started in a terminal outside the IDE at this project's companion, in the syntax of the shell configured for the
 * IDE's terminal (Settings | Tools | Terminal | Shell path: PowerShell,
 * cmd, fish, or a POSIX shell), else PowerShell on Windows and `$SHELL`
 * elsewhere ([TerminalEnv.shellLines]). The IDE's own terminals need none of
 * this: they get the values directly ([QwenTerminalCustomizer]). Registered
 * with the Terminal plugin only (qwen-terminal.xml).
 */
class CopyTerminalEnvAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        val shellPath = TerminalProjectOptionsProvider.getInstance(project).shellPath
        ApplicationManager.getApplication().executeOnPooledThread(Runnable {
            val service = project.service<QwenCompanionService>()
            service.start()
            val (text, type) = try {
                val lines = TerminalEnv.shellLines(service.terminalEnv(), "auto", shellPath)
                CopyPasteManager.getInstance().setContents(StringSelection(lines))
                Pair("Copied; run these in your shell, then ${Served.names(service.servedCli).replace(" and ", " or ")}:\n$lines", NotificationType.INFORMATION)
            } catch (ex: IllegalArgumentException) {
                Pair("Cannot write the terminal environment for $shellPath: ${ex.message}", NotificationType.ERROR)
            }
            NotificationGroupManager.getInstance()
                .getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
                .createNotification(text, type)
                .notify(project)
        })
    }
}
