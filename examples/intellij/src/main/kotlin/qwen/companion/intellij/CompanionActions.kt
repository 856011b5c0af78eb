package qwen.companion.intellij

import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.components.service
import com.intellij.openapi.fileEditor.FileEditorManager
import com.intellij.openapi.project.Project
import com.intellij.openapi.ui.Messages
import com.intellij.testFramework.LightVirtualFile
import qwen.companion.QwenCompanionException
import qwen.companion.intellij.core.HealthText
import qwen.companion.intellij.core.LogRing
import qwen.companion.intellij.sessions.QwenParticipantService

/** The plugin's recent log lines (its own and the library's); every line also goes to idea.log. */
object QwenCompanionLog {
    val ring = LogRing(2000)
}

/**
 * Qwen Companion: Health (Qwen.Health, Tools | Qwen Code): the CLIs the
 * companion serves and their discovery files, then the library's report —
 * its version, `qwen` (and `gemini` when Gemini CLI is served) and `node`
 * found with their versions against the tested ones, the discovery files,
 * connected CLIs, the plugin MCP server and its registration, the
 * participant — in a dialog. Computed off the UI thread.
 */
class QwenHealthAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        val app = ApplicationManager.getApplication()
        app.executeOnPooledThread(Runnable {
            val text: String
            val worst: String
            try {
                val service = project.service<QwenCompanionService>()
                val report = service.health(QwenParticipantService.getInstance(project).participant.current)
                text = service.servedText() + HealthText.format(report)
                worst = HealthText.worst(report)
            } catch (ex: QwenCompanionException) {
                app.invokeLater({ Messages.showErrorDialog(project, "The health report failed: ${ex.message}", TITLE) }, ModalityState.defaultModalityState())
                return@Runnable
            }
            app.invokeLater({
                if (project.isDisposed) return@invokeLater
                when (worst) {
                    "error" -> Messages.showErrorDialog(project, text, TITLE)
                    "warn" -> Messages.showWarningDialog(project, text, TITLE)
                    else -> Messages.showInfoMessage(project, text, TITLE)
                }
            }, ModalityState.defaultModalityState())
        })
    }

    companion object {
        const val TITLE = "Qwen Companion: Health"
    }
}

/**
 * Show Qwen Companion Log (Qwen.ShowLog): the last 2000 lines of the
 * plugin's and the library's log in a read-only editor tab (Help | Show Log
 * in Files opens idea.log, which has every line).
 */
class QwenShowLogAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        val file = LightVirtualFile("Qwen Companion log", QwenCompanionLog.ring.text())
        file.setWritable(false)
        FileEditorManager.getInstance(project).openFile(file, true)
    }
}

/** Close All Qwen Diffs (Qwen.Diff.CloseAll): rejects every open Qwen diff of the project and closes its tab. */
class QwenCloseAllDiffsAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        val app = ApplicationManager.getApplication()
        app.executeOnPooledThread(Runnable {
            val n = project.service<QwenCompanionService>().rejectAllDiffs()
            app.invokeLater({
                if (project.isDisposed) return@invokeLater
                NotificationGroupManager.getInstance().getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
                    .createNotification(if (n == 0) "No Qwen diff was open" else "Rejected $n Qwen diff${if (n == 1) "" else "s"}", NotificationType.INFORMATION)
                    .notify(project)
            }, ModalityState.defaultModalityState())
        })
    }
}
