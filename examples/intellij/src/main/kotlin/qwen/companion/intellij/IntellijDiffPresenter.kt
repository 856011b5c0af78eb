package qwen.companion.intellij

import com.intellij.diff.DiffContentFactory
import com.intellij.diff.chains.SimpleDiffRequestChain
import com.intellij.diff.editor.ChainDiffVirtualFile
import com.intellij.diff.editor.DiffEditorTabFilesManager
import com.intellij.diff.requests.SimpleDiffRequest
import com.intellij.diff.util.DiffUserDataKeys
import com.intellij.openapi.Disposable
import com.intellij.openapi.actionSystem.ActionManager
import com.intellij.openapi.actionSystem.AnAction
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.editor.Document
import com.intellij.openapi.fileEditor.FileEditorManager
import com.intellij.openapi.fileEditor.FileEditorManagerListener
import com.intellij.openapi.fileTypes.FileTypeManager
import com.intellij.openapi.project.Project
import com.intellij.openapi.util.Key
import com.intellij.openapi.vfs.VirtualFile
import qwen.companion.intellij.core.DiffPresenter
import qwen.companion.intellij.core.DiffSession
import qwen.companion.intellij.core.PendingWaits
import qwen.companion.intellij.core.UiClosingException
import java.io.File
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.TimeoutException

/** A Qwen diff as its actions see it: the session and the editable right side. */
class QwenDiffView(val session: DiffSession, val document: Document) {
    /** Accept with the document's text (no read action needed: an immutable snapshot). */
    fun accept() = session.acceptView(document.immutableCharSequence)

    companion object {
        /** Put on the diff request; [QwenDiffAcceptAction] / [QwenDiffRejectAction] find it there. */
        val KEY: Key<QwenDiffView> = Key.create("qwen.companion.diff.view")
    }
}

/**
 * Shows a diff with the IDE's built-in viewer in an editor tab: left = the
 * file now, right = the proposal in an editable document, with the Accept /
 * Reject actions (Qwen.Diff.Accept, Qwen.Diff.Reject; shortcuts in
 * plugin.xml) in its toolbar. Closing the tab without deciding reports
 * "closed" (the CLI treats it as rejected). The state machine is
 * [qwen.companion.intellij.core.DiffController].
 *
 * Threading: [show] runs on the library's callback thread and waits (at most
 * [showTimeoutMs], below the library's request timeout) for the UI thread;
 * [dispose] ends that wait at once ([PendingWaits]). [currentText] reads the
 * document's immutable snapshot, never a read action, so the callback thread
 * cannot block on a project disposal that holds the write lock.
 */
class IntellijDiffPresenter(
    private val project: Project,
    private val showTimeoutMs: Long,
    parent: Disposable
) : DiffPresenter {
    private val tabs = ConcurrentHashMap<Long, VirtualFile>()
    private val views = ConcurrentHashMap<VirtualFile, QwenDiffView>()
    private val waits = PendingWaits()

    init {
        // The user closed a diff tab: "closed without deciding" (ignored once decided).
        project.messageBus.connect(parent).subscribe(FileEditorManagerListener.FILE_EDITOR_MANAGER, object : FileEditorManagerListener {
            override fun fileClosed(source: FileEditorManager, file: VirtualFile) {
                val view = views.remove(file) ?: return
                tabs.remove(view.session.id)
                view.session.viewClosed()
            }
        })
    }

    /** Called on the library's callback thread: shows the diff on the UI thread and waits for it. */
    override fun show(session: DiffSession) {
        if (project.isDisposed) throw UiClosingException("the project is closing")
        try {
            waits.await(showTimeoutMs) { shown ->
                ApplicationManager.getApplication().invokeLater({
                    try {
                        showOnUiThread(session)
                        shown.complete(Unit)
                    } catch (t: Throwable) {
                        shown.completeExceptionally(t)
                    }
                }, ModalityState.defaultModalityState())
            }
        } catch (e: TimeoutException) {
            throw IllegalStateException("the IDE was busy and did not show the diff within $showTimeoutMs ms")
        }
    }

    private fun showOnUiThread(session: DiffSession) {
        if (waits.isDisposed || project.isDisposed) throw UiClosingException("the project is closing")
        val name = File(session.path).name
        val fileType = FileTypeManager.getInstance().getFileTypeByFileName(name)
        val factory = DiffContentFactory.getInstance()
        val left = factory.create(project, session.originalText ?: "", fileType)
        val right = factory.createEditable(project, session.proposedText, fileType)
        val request = SimpleDiffRequest(
            session.title,
            left,
            right,
            if (session.originalText == null) "New file" else "Current",
            "Proposed by Qwen Code (editable)"
        )
        val view = QwenDiffView(session, right.document)
        request.putUserData(QwenDiffView.KEY, view)
        val actions = ActionManager.getInstance()
        request.putUserData(
            DiffUserDataKeys.CONTEXT_ACTIONS,
            listOfNotNull<AnAction>(actions.getAction(QwenDiffAcceptAction.ID), actions.getAction(QwenDiffRejectAction.ID))
        )
        // An editor tab (not a frame); the built-in viewer even when the user
        // configured an external diff tool: only it has the editable side and our actions.
        val file = ChainDiffVirtualFile(SimpleDiffRequestChain(request), session.title)
        tabs[session.id] = file
        views[file] = view
        DiffEditorTabFilesManager.getInstance(project).showDiffFile(file, true)
    }

    /** The view's text from the document's immutable snapshot (any thread, no read action). */
    override fun currentText(session: DiffSession): String? {
        val file = tabs[session.id] ?: return null
        return views[file]?.document?.immutableCharSequence?.toString()
    }

    override fun close(session: DiffSession) {
        val file = tabs.remove(session.id) ?: return
        views.remove(file)
        closeTab(file)
    }

    override fun dispose() {
        waits.dispose()
        val all = ArrayList(tabs.values)
        tabs.clear()
        views.clear()
        for (f in all) closeTab(f)
    }

    private fun closeTab(file: VirtualFile) {
        ApplicationManager.getApplication().invokeLater({
            if (!project.isDisposed) FileEditorManager.getInstance(project).closeFile(file)
        }, ModalityState.any())
    }
}
