package qwen.companion.intellij

import com.intellij.diff.tools.util.DiffDataKeys
import com.intellij.icons.AllIcons
import com.intellij.openapi.actionSystem.ActionPromoter
import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnAction
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.actionSystem.DataContext
import com.intellij.openapi.project.DumbAwareAction

/** The Qwen diff of the event's context (the diff tab, its editors or toolbar), if any and still open. */
private fun qwenView(e: AnActionEvent): QwenDiffView? {
    val view = e.getData(DiffDataKeys.DIFF_REQUEST)?.getUserData(QwenDiffView.KEY) ?: return null
    return if (view.session.isOpen) view else null
}

/**
 * Accept (Qwen.Diff.Accept): Qwen Code writes the right side as edited here,
 * with the file's line separator; an unchanged proposal is accepted as is.
 * Default shortcuts (plugin.xml): Ctrl+S / Cmd+S and Alt+Shift+Enter, only
 * inside a Qwen diff (Save All elsewhere).
 */
class QwenDiffAcceptAction : DumbAwareAction("Accept Qwen Code Change", "Qwen Code writes the right side as edited here", AllIcons.Actions.Checked) {
    override fun actionPerformed(e: AnActionEvent) {
        qwenView(e)?.accept()
    }

    override fun update(e: AnActionEvent) {
        val enabled = qwenView(e) != null
        e.presentation.isEnabled = enabled
        e.presentation.isVisible = enabled || e.getData(DiffDataKeys.DIFF_REQUEST)?.getUserData(QwenDiffView.KEY) != null
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.EDT

    companion object {
        const val ID = "Qwen.Diff.Accept"
    }
}

/** Reject (Qwen.Diff.Reject, Alt+Shift+Backspace): the file is left as it is. */
class QwenDiffRejectAction : DumbAwareAction("Reject Qwen Code Change", "The file is left as it is", AllIcons.Actions.Cancel) {
    override fun actionPerformed(e: AnActionEvent) {
        qwenView(e)?.session?.reject()
    }

    override fun update(e: AnActionEvent) {
        val enabled = qwenView(e) != null
        e.presentation.isEnabled = enabled
        e.presentation.isVisible = enabled || e.getData(DiffDataKeys.DIFF_REQUEST)?.getUserData(QwenDiffView.KEY) != null
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.EDT

    companion object {
        const val ID = "Qwen.Diff.Reject"
    }
}

/** Inside a Qwen diff, Accept/Reject win their shortcuts over the IDE's own actions (Ctrl+S is Save All). */
class QwenDiffActionPromoter : ActionPromoter {
    override fun promote(actions: List<AnAction>, context: DataContext): List<AnAction> {
        val request = DiffDataKeys.DIFF_REQUEST.getData(context) ?: return emptyList()
        if (request.getUserData(QwenDiffView.KEY) == null) return emptyList()
        return actions.filter { it is QwenDiffAcceptAction || it is QwenDiffRejectAction }
    }
}
