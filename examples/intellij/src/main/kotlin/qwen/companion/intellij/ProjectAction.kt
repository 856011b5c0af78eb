package qwen.companion.intellij

import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.project.DumbAwareAction
import com.intellij.openapi.project.Project

/**
 * An action of this plugin that works on the open project: enabled while
 * there is one (its state is read on a background thread), [perform] called
 * with it on the UI thread; without a project it does nothing.
 */
abstract class ProjectAction : DumbAwareAction() {
    /** Runs the action for [project] (on the UI thread: long work goes to a pooled thread). */
    abstract fun perform(project: Project, e: AnActionEvent)

    final override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        perform(project, e)
    }

    override fun update(e: AnActionEvent) {
        e.presentation.isEnabled = e.project != null
    }

    final override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}
