package qwen.companion.intellij.ui

import com.intellij.notification.NotificationAction
import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.fileEditor.FileEditorManager
import com.intellij.openapi.project.Project
import com.intellij.openapi.vfs.LocalFileSystem
import com.intellij.openapi.wm.ToolWindowManager
import qwen.companion.intellij.QwenCompanionService
import qwen.companion.intellij.core.plugins.Checklist
import qwen.companion.intellij.core.plugins.FileCard
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.plugins.ToolResultView

/** Runs plugin tools for a project and shows their results. */
object PluginRunner {
    /** Calls [tool] of [pluginId] (empty params, `cwd` = the project folder) off the UI thread, then shows the result. */
    fun run(project: Project, pluginId: String, tool: String) {
        val model = QwenPluginUi.getInstance().model()
        if (model == null) {
            notify(project, "Qwen Code plugins are off", QwenPluginHostStatus.why(), NotificationType.WARNING)
            return
        }
        QwenPluginUi.pooled {
            val (view, error) = model.runTool(pluginId, tool, emptyMap(), project.basePath)
            QwenPluginUi.onEdt {
                if (project.isDisposed) return@onEdt
                if (view == null) notify(project, "$pluginId/$tool failed", Html.escape(error ?: ""), NotificationType.WARNING) else show(project, view)
            }
        }
    }

    /** Shows [view]: in the Qwen tool window's Results tab, a balloon with its gist, and a file card opens its file. */
    fun show(project: Project, view: ToolResultView) {
        QwenToolWindowFactory.showResult(project, view.html())
        val card = view.fileCard
        if (card != null) openFile(project, card)
        val gist = when {
            view.checklist != null -> Checklist.summary(view.checklist)
            card != null -> card.name
            else -> view.text.lineSequence().firstOrNull() ?: ""
        }
        notify(project, "${view.pluginId}: ${view.tool}", Html.escape(gist), NotificationType.INFORMATION) {
            ToolWindowManager.getInstance(project).getToolWindow(QwenToolWindowFactory.ID)?.show(null)
        }
    }

    /** Opens a file card's file in the editor (false when it does not exist). */
    fun openFile(project: Project, card: FileCard): Boolean {
        val vf = LocalFileSystem.getInstance().refreshAndFindFileByPath(card.path) ?: return false
        FileEditorManager.getInstance(project).openFile(vf, true)
        return true
    }

    /** A balloon of the plugin's notification group; [onOpen] becomes its [label] action. */
    fun notify(project: Project?, title: String, html: String, type: NotificationType, label: String = "Show", onOpen: (() -> Unit)? = null) {
        val n = NotificationGroupManager.getInstance().getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
            .createNotification(title, html, type)
        if (onOpen != null) n.addAction(NotificationAction.createSimpleExpiring(label, Runnable { onOpen() }))
        n.notify(project)
    }
}

/** Why the plugin host is not running, for the user. */
object QwenPluginHostStatus {
    fun why(): String = qwen.companion.intellij.QwenPluginHostService.getInstance().lastError
        ?: "Enable the plugin host in Settings | Tools | Qwen Code Companion."
}
