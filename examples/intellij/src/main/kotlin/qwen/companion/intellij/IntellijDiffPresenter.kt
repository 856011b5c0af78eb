package qwen.companion.intellij

import com.intellij.diff.DiffContentFactory
import com.intellij.diff.DiffDialogHints
import com.intellij.diff.DiffManagerEx
import com.intellij.diff.requests.SimpleDiffRequest
import com.intellij.diff.util.DiffUserDataKeys
import com.intellij.icons.AllIcons
import com.intellij.openapi.Disposable
import com.intellij.openapi.actionSystem.ActionUpdateThread
import com.intellij.openapi.actionSystem.AnAction
import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.application.runReadAction
import com.intellij.openapi.editor.Document
import com.intellij.openapi.fileTypes.FileTypeManager
import com.intellij.openapi.project.DumbAwareAction
import com.intellij.openapi.project.Project
import com.intellij.openapi.ui.WindowWrapper
import com.intellij.openapi.util.Disposer
import com.intellij.util.Consumer
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffSession
import java.io.File
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit

/**
 * Shows a diff with the IDE's built-in viewer: left = the file now, right =
 * the proposal in an editable document, plus Accept / Reject toolbar actions.
 * Closing the window without deciding reports "closed" (the CLI treats it as
 * rejected). The state machine is [qwen.companion.intellij.core.DiffController].
 */
class IntellijDiffPresenter(private val project: Project) : DiffPresenter {
    private val windows = ConcurrentHashMap<Long, WindowWrapper>()
    private val documents = ConcurrentHashMap<Long, Document>()
    private val pending: MutableSet<CompletableFuture<Unit>> = ConcurrentHashMap.newKeySet()
    @Volatile private var disposed = false

    /** Called on the library's callback thread: shows the diff on the UI thread and waits for it. */
    override fun show(session: DiffSession) {
        check(!disposed && !project.isDisposed) { "the project is closing" }
        val shown = CompletableFuture<Unit>()
        pending.add(shown)
        try {
            ApplicationManager.getApplication().invokeLater({
                try {
                    showOnUiThread(session)
                    shown.complete(Unit)
                } catch (t: Throwable) {
                    shown.completeExceptionally(t)
                }
            }, ModalityState.defaultModalityState())
            // The library answers the CLI after 30 s at the latest; stay below.
            shown.get(SHOW_TIMEOUT_SECONDS, TimeUnit.SECONDS)
        } catch (e: ExecutionException) {
            throw e.cause ?: e
        } finally {
            pending.remove(shown)
        }
    }

    private fun showOnUiThread(session: DiffSession) {
        val name = File(session.path).name
        val fileType = FileTypeManager.getInstance().getFileTypeByFileName(name)
        val factory = DiffContentFactory.getInstance()
        val left = factory.create(project, session.originalText ?: "", fileType)
        val right = factory.createEditable(project, session.proposedText, fileType)
        documents[session.id] = right.document
        val request = SimpleDiffRequest(
            "Qwen Code: $name",
            left,
            right,
            if (session.originalText == null) "New file" else "Current",
            "Proposed by Qwen Code (editable)"
        )
        request.putUserData(
            DiffUserDataKeys.CONTEXT_ACTIONS,
            listOf<AnAction>(AcceptAction(session, right.document), RejectAction(session))
        )
        val hints = DiffDialogHints(WindowWrapper.Mode.FRAME, null, Consumer { wrapper ->
            windows[session.id] = wrapper
            Disposer.register(wrapper, Disposable {
                windows.remove(session.id)
                documents.remove(session.id)
                session.viewClosed() // ignored when already decided or closed by the CLI
            })
        })
        // Built-in viewer even when the user configured an external diff tool:
        // only it has the editable side and our actions.
        DiffManagerEx.getInstance().showDiffBuiltin(project, request, hints)
    }

    override fun currentText(session: DiffSession): String? {
        val document = documents[session.id] ?: return null
        return runReadAction { document.text }
    }

    override fun close(session: DiffSession) {
        documents.remove(session.id)
        val window = windows.remove(session.id) ?: return
        ApplicationManager.getApplication().invokeLater({ closeQuietly(window) }, ModalityState.any())
    }

    override fun dispose() {
        disposed = true
        for (f in pending) f.completeExceptionally(IllegalStateException("the project is closing"))
        val all = ArrayList(windows.values)
        windows.clear()
        documents.clear()
        ApplicationManager.getApplication().invokeLater({ for (w in all) closeQuietly(w) }, ModalityState.any())
    }

    /** The user may have closed it meanwhile. */
    private fun closeQuietly(window: WindowWrapper) {
        try {
            window.close()
        } catch (e: RuntimeException) {
            // already closed / disposed
        }
    }

    private class AcceptAction(private val session: DiffSession, private val document: Document) :
        DumbAwareAction("Accept", "Accept the change; Qwen Code writes the right side as edited here", AllIcons.Actions.Checked) {
        override fun actionPerformed(e: AnActionEvent) {
            session.accept(document.text)
        }

        override fun update(e: AnActionEvent) {
            e.presentation.isEnabled = session.isOpen
        }

        override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.EDT
    }

    private class RejectAction(private val session: DiffSession) :
        DumbAwareAction("Reject", "Reject the change; the file is left as it is", AllIcons.Actions.Cancel) {
        override fun actionPerformed(e: AnActionEvent) {
            session.reject()
        }

        override fun update(e: AnActionEvent) {
            e.presentation.isEnabled = session.isOpen
        }

        override fun getActionUpdateThread(): ActionUpdateThread = ActionUpdateThread.EDT
    }

    companion object {
        private const val SHOW_TIMEOUT_SECONDS = 25L
    }
}
