package qwen.companion.intellij

import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.actionSystem.CommonDataKeys
import com.intellij.openapi.editor.Editor
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.project.DumbAwareAction
import com.intellij.openapi.vfs.VirtualFile
import qwen.companion.intellij.core.PromptReference

/** The file of the event: the editor's document, else the selected file (project view, tab). */
private fun fileOf(e: AnActionEvent): VirtualFile? {
    val editor = e.getData(CommonDataKeys.EDITOR)
    val fromEditor = editor?.let { FileDocumentManager.getInstance().getFile(it.document) }
    val vf = fromEditor ?: e.getData(CommonDataKeys.VIRTUAL_FILE) ?: return null
    return if (vf.isDirectory || !vf.isInLocalFileSystem) null else vf
}

/** The lines of [editor]'s selection (1-based), or null when nothing is selected. */
private fun selectedLines(editor: Editor): PromptReference.LineRange? {
    val sel = editor.selectionModel
    if (!sel.hasSelection()) return null
    val doc = editor.document
    val start = sel.selectionStart
    val end = sel.selectionEnd
    val endLine = doc.getLineNumber(end)
    return PromptReference.selectionLines(doc.getLineNumber(start) + 1, endLine + 1, end - doc.getLineStartOffset(endLine) + 1)
}

/**
 * "Add File to Qwen Prompt" / "Add File to Gemini Prompt": the action's text
 * names the agent the reference goes to ([QwenTerminals.promptAgent]).
 */
private fun named(e: AnActionEvent, what: String) {
    val project = e.project ?: return
    e.presentation.text = "Add $what to ${QwenTerminals.getInstance(project).promptAgent.shortName} Prompt"
}

/**
 * Add File to Qwen Prompt (Qwen.AddFileToPrompt; editor and project view
 * context menus): types `@path ` into the agent terminal used last, Qwen
 * Code's or Gemini CLI's ([QwenTerminals]).
 */
class AddFileToQwenPromptAction : DumbAwareAction() {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val file = fileOf(e) ?: return
        QwenTerminals.getInstance(project).addReference(file.path, null)
    }

    override fun update(e: AnActionEvent) {
        e.presentation.isEnabledAndVisible = e.project != null && fileOf(e) != null
        named(e, "File")
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}

/**
 * Add Selection to Qwen Prompt (Qwen.AddSelectionToPrompt; editor context
 * menu, Ctrl+Alt+Shift+Q, Ctrl+Option+Shift+Q on macOS): types `@path (lines A-B) ` for
 * the selected lines, or `@path ` when nothing is selected, into the agent
 * terminal used last.
 */
class AddSelectionToQwenPromptAction : DumbAwareAction() {
    override fun actionPerformed(e: AnActionEvent) {
        val project = e.project ?: return
        val editor = e.getData(CommonDataKeys.EDITOR)
        val file = fileOf(e) ?: return
        QwenTerminals.getInstance(project).addReference(file.path, editor?.let { selectedLines(it) })
    }

    override fun update(e: AnActionEvent) {
        e.presentation.isEnabledAndVisible = e.project != null && fileOf(e) != null
        named(e, "Selection")
    }

    override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.BGT
}
