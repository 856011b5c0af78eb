package qwen.companion.intellij

import com.intellij.codeInsight.daemon.impl.DaemonCodeAnalyzerEx
import com.intellij.codeInsight.daemon.impl.HighlightInfo
import com.intellij.lang.annotation.HighlightSeverity
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.application.runReadAction
import com.intellij.openapi.editor.Document
import com.intellij.openapi.editor.ScrollType
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.fileEditor.FileEditorManager
import com.intellij.openapi.fileEditor.OpenFileDescriptor
import com.intellij.openapi.project.Project
import com.intellij.openapi.project.ProjectManager
import com.intellij.openapi.roots.ProjectRootManager
import com.intellij.openapi.vfs.LocalFileSystem
import com.intellij.openapi.vfs.VirtualFile
import com.intellij.openapi.wm.IdeFocusManager
import com.intellij.util.Processor
import qwen.companion.intellij.core.CodePoints
import qwen.companion.intellij.core.EditorDiagnostic
import qwen.companion.intellij.core.EditorModel
import qwen.companion.intellij.core.EditorSelection
import qwen.companion.intellij.core.EditorToolException
import qwen.companion.intellij.core.OpenEditorInfo
import qwen.companion.intellij.core.Severities
import java.io.File
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException

/**
 * The editor tools' [EditorModel] over the IntelliJ platform, for every open
 * project (the plugin host, and so the tools, are IDE-wide). Called on the
 * tools' worker threads ([qwen.companion.intellij.core.EditorTools]):
 * reads run in a read action there; what needs the UI thread (the selected
 * editor, opening a file) is posted to it and waited for at most
 * [UI_WAIT_MS].
 *
 * Diagnostics are what IntelliJ's own highlighting found in the files it
 * has analysed (the open editors): the highlights of the document's markup
 * model (`DaemonCodeAnalyzerEx.processHighlights`), the problems shown in
 * the editor's error stripe. No inspection is run for the request.
 */
class IdeEditorModel : EditorModel {
    override fun diagnostics(path: String?, minSeverity: String): List<EditorDiagnostic> {
        val out = ArrayList<EditorDiagnostic>()
        val floor = severityFloor(minSeverity)
        for (project in projects()) {
            val files: List<VirtualFile> = if (path != null) {
                listOfNotNull(LocalFileSystem.getInstance().findFileByPath(vfsPath(path)))
            } else {
                onUi { FileEditorManager.getInstance(project).openFiles.toList() }
            }
            for (vf in files) {
                if (vf.isDirectory || !vf.isInLocalFileSystem) continue
                runReadAction {
                    val doc = FileDocumentManager.getInstance().getCachedDocument(vf)
                    if (doc != null && !project.isDisposed) collect(project, vf, doc, floor, out)
                }
            }
            if (path != null && out.isNotEmpty()) break // one project's analysis of the file is enough
        }
        return out
    }

    private fun collect(project: Project, vf: VirtualFile, doc: Document, floor: HighlightSeverity, out: MutableList<EditorDiagnostic>) {
        val text = doc.immutableCharSequence
        val seen = HashSet<String>()
        DaemonCodeAnalyzerEx.processHighlights(doc, project, floor, 0, doc.textLength, Processor<HighlightInfo> { info ->
            val message = info.description
            if (message != null && message.isNotBlank()) {
                val start = minOf(info.startOffset, doc.textLength)
                val end = minOf(maxOf(info.endOffset, start), doc.textLength)
                val line = doc.getLineNumber(start)
                val endLine = doc.getLineNumber(end)
                val d = EditorDiagnostic(
                    path = nativePath(vf),
                    line = line + 1,
                    column = CodePoints.column(text, doc.getLineStartOffset(line), start),
                    endLine = endLine + 1,
                    endColumn = CodePoints.column(text, doc.getLineStartOffset(endLine), end),
                    severity = Severities.ofIntellij(info.severity.myVal),
                    message = message,
                    source = info.inspectionToolId ?: "IntelliJ"
                )
                // The platform may report one problem through two passes: keep one.
                if (seen.add("${d.line}:${d.column}:${d.severity}:${d.message}")) out.add(d)
            }
            out.size < 5000
        })
    }

    override fun openFile(path: String, line: Int?, column: Int?, endLine: Int?, endColumn: Int?) {
        val vf = LocalFileSystem.getInstance().refreshAndFindFileByPath(vfsPath(path))
        if (vf == null || !File(path).exists()) throw EditorToolException("no such file: $path (the editor opens existing files only)")
        if (vf.isDirectory) throw EditorToolException("$path is a folder, not a file")
        val project = projectOf(path) ?: throw EditorToolException("no project is open in the IDE")
        onUi(ModalityState.defaultModalityState()) {
            val doc = FileDocumentManager.getInstance().getDocument(vf)
            val start = if (doc != null && line != null) offsetOf(doc, line, column ?: 1) else null
            val descriptor = if (start != null) OpenFileDescriptor(project, vf, start) else OpenFileDescriptor(project, vf)
            descriptor.navigate(true)
            val editor = FileEditorManager.getInstance(project).selectedTextEditor
            if (editor != null && doc != null && start != null && editor.document === doc) {
                if (endLine != null) {
                    val end = offsetOf(doc, endLine, endColumn ?: Int.MAX_VALUE)
                    editor.selectionModel.setSelection(minOf(start, end), maxOf(start, end))
                }
                editor.caretModel.moveToOffset(start)
                editor.scrollingModel.scrollToCaret(ScrollType.CENTER)
            }
        }
    }

    override fun openEditors(): List<OpenEditorInfo> = onUi {
        val out = ArrayList<OpenEditorInfo>()
        val seen = HashSet<String>()
        val active = activeProject()
        for (project in projects()) {
            val fem = FileEditorManager.getInstance(project)
            val selected = if (project === active) fem.selectedTextEditor?.let { FileDocumentManager.getInstance().getFile(it.document) } else null
            for (vf in fem.openFiles) {
                if (!vf.isInLocalFileSystem || vf.isDirectory || !seen.add(vf.path)) continue
                out.add(OpenEditorInfo(nativePath(vf), vf == selected, FileDocumentManager.getInstance().isFileModified(vf), vf.fileType.name))
            }
        }
        out
    }

    override fun selection(): EditorSelection? = onUi {
        val project = activeProject() ?: return@onUi null
        val editor = FileEditorManager.getInstance(project).selectedTextEditor ?: return@onUi null
        val vf = FileDocumentManager.getInstance().getFile(editor.document) ?: return@onUi null
        val sel = editor.selectionModel
        if (!sel.hasSelection() || !vf.isInLocalFileSystem) return@onUi null
        val doc = editor.document
        val text = doc.immutableCharSequence
        val s = sel.selectionStart
        val e = sel.selectionEnd
        val sl = doc.getLineNumber(s)
        val el = doc.getLineNumber(e)
        EditorSelection(
            nativePath(vf), text.subSequence(s, e).toString(),
            sl + 1, CodePoints.column(text, doc.getLineStartOffset(sl), s),
            el + 1, CodePoints.column(text, doc.getLineStartOffset(el), e)
        )
    }

    private fun offsetOf(doc: Document, line: Int, column: Int): Int {
        if (doc.lineCount == 0) return 0
        val l = minOf(line, doc.lineCount) - 1
        return CodePoints.offset(doc.immutableCharSequence, doc.getLineStartOffset(l), doc.getLineEndOffset(l), column)
    }

    private fun projects(): List<Project> = ProjectManager.getInstance().openProjects.filter { !it.isDisposed }

    /**
     * The project whose frame was focused last (the user is typing to qwen in
     * its terminal, so no editor has the focus now), else the first open one.
     */
    private fun activeProject(): Project? {
        val all = projects()
        val last = IdeFocusManager.getGlobalInstance().lastFocusedFrame?.project
        return all.firstOrNull { it === last } ?: all.firstOrNull()
    }

    /** The open project holding [path] in a content root, else the active one. */
    private fun projectOf(nativePath: String): Project? {
        val path = vfsPath(nativePath)
        val all = projects()
        val owner = all.firstOrNull { p ->
            runReadAction { ProjectRootManager.getInstance(p).contentRoots.any { r -> path == r.path || path.startsWith(r.path.trimEnd('/') + "/") } }
        }
        return owner ?: onUi { activeProject() }
    }

    /** The IDE's virtual file paths use `/` on every OS; the editor tools speak the OS's own paths. */
    private fun vfsPath(path: String): String = path.replace(File.separatorChar, '/')

    private fun nativePath(vf: VirtualFile): String = File(vf.path).path

    private fun severityFloor(name: String): HighlightSeverity = when (Severities.intellijFloor(name)) {
        400 -> HighlightSeverity.ERROR
        300 -> HighlightSeverity.WARNING
        200 -> HighlightSeverity.WEAK_WARNING
        else -> HighlightSeverity.INFORMATION
    }

    /** Runs [block] on the UI thread and waits for it (at most [UI_WAIT_MS]). */
    private fun <T> onUi(modality: ModalityState = ModalityState.any(), block: () -> T): T {
        val app = ApplicationManager.getApplication()
        if (app.isDispatchThread) return block()
        val f = CompletableFuture<T>()
        app.invokeLater({
            try {
                f.complete(block())
            } catch (t: Throwable) {
                f.completeExceptionally(t)
            }
        }, modality)
        try {
            return f.get(UI_WAIT_MS, TimeUnit.MILLISECONDS)
        } catch (e: TimeoutException) {
            throw EditorToolException("the IDE was busy and did not answer within $UI_WAIT_MS ms")
        } catch (e: ExecutionException) {
            val cause = e.cause ?: e
            if (cause is EditorToolException) throw cause
            throw cause
        }
    }

    companion object {
        const val UI_WAIT_MS = 10000L
    }
}
