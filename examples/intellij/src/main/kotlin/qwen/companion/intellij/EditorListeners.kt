package qwen.companion.intellij

import com.intellij.openapi.Disposable
import com.intellij.openapi.editor.Editor
import com.intellij.openapi.editor.EditorFactory
import com.intellij.openapi.editor.EditorKind
import com.intellij.openapi.editor.event.CaretEvent
import com.intellij.openapi.editor.event.CaretListener
import com.intellij.openapi.editor.event.SelectionEvent
import com.intellij.openapi.editor.event.SelectionListener
import com.intellij.openapi.fileEditor.FileDocumentManager
import com.intellij.openapi.fileEditor.FileEditorManager
import com.intellij.openapi.fileEditor.FileEditorManagerEvent
import com.intellij.openapi.fileEditor.FileEditorManagerListener
import com.intellij.openapi.fileEditor.TextEditor
import com.intellij.openapi.project.Project
import com.intellij.openapi.vfs.VirtualFile
import com.intellij.openapi.vfs.VirtualFileManager
import com.intellij.openapi.vfs.newvfs.BulkFileListener
import com.intellij.openapi.vfs.newvfs.events.VFileDeleteEvent
import com.intellij.openapi.vfs.newvfs.events.VFileEvent
import com.intellij.openapi.vfs.newvfs.events.VFileMoveEvent
import com.intellij.openapi.vfs.newvfs.events.VFilePropertyChangeEvent
import qwen.companion.intellij.core.EditorContextFeeder
import qwen.companion.intellij.core.SelectionText

/**
 * Platform events → [EditorContextFeeder]. Only reads editor state and
 * forwards it; filtering, position conversion and de-duplication are in the
 * (tested) feeder. Every listener is registered with [install]'s parent
 * disposable, so it goes away with the project service.
 */
object EditorListeners {
    fun install(project: Project, feeder: EditorContextFeeder, parent: Disposable) {
        val bus = project.messageBus.connect(parent)

        bus.subscribe(FileEditorManagerListener.FILE_EDITOR_MANAGER, object : FileEditorManagerListener {
            override fun fileOpened(source: FileEditorManager, file: VirtualFile) {
                feeder.fileOpened(localPath(file))
            }

            override fun fileClosed(source: FileEditorManager, file: VirtualFile) {
                feeder.fileClosed(localPath(file))
            }

            override fun selectionChanged(event: FileEditorManagerEvent) {
                val file = event.newFile ?: return
                feeder.fileFocused(localPath(file))
                val editor = (event.newEditor as? TextEditor)?.editor ?: return
                reportCaret(editor, feeder)
                reportSelection(editor, feeder)
            }
        })

        // Renames and moves of files and folders (VFS_CHANGES is application-wide;
        // the feeder ignores paths it does not track).
        bus.subscribe(VirtualFileManager.VFS_CHANGES, object : BulkFileListener {
            override fun after(events: MutableList<out VFileEvent>) {
                for (e in events) {
                    when (e) {
                        is VFilePropertyChangeEvent ->
                            if (e.propertyName == VirtualFile.PROP_NAME && e.file.isInLocalFileSystem) {
                                feeder.fileRenamed(e.oldPath, e.newPath, e.file.isDirectory)
                            }
                        is VFileMoveEvent ->
                            if (e.file.isInLocalFileSystem) feeder.fileRenamed(e.oldPath, e.newPath, e.file.isDirectory)
                        is VFileDeleteEvent -> feeder.fileDeleted(e.path)
                    }
                }
            }
        })

        val multicaster = EditorFactory.getInstance().eventMulticaster
        multicaster.addCaretListener(object : CaretListener {
            override fun caretPositionChanged(event: CaretEvent) {
                if (isProjectFileEditor(event.editor, project)) reportCaret(event.editor, feeder)
            }
        }, parent)
        multicaster.addSelectionListener(object : SelectionListener {
            override fun selectionChanged(e: SelectionEvent) {
                if (isProjectFileEditor(e.editor, project)) reportSelection(e.editor, feeder)
            }
        }, parent)
    }

    /** Feeds what is already open when the companion starts (UI thread). */
    fun reportOpenEditors(project: Project, feeder: EditorContextFeeder) {
        val fem = FileEditorManager.getInstance(project)
        for (f in fem.openFiles) feeder.fileOpened(localPath(f))
        val selected = fem.selectedFiles.firstOrNull() ?: return
        feeder.fileFocused(localPath(selected))
        val editor = fem.selectedTextEditor ?: return
        reportCaret(editor, feeder)
        reportSelection(editor, feeder)
    }

    /** Main editors of this project's files (not diff panes, consoles or previews). */
    private fun isProjectFileEditor(editor: Editor, project: Project): Boolean =
        editor.project == project && editor.editorKind == EditorKind.MAIN_EDITOR

    private fun fileOf(editor: Editor): VirtualFile? = FileDocumentManager.getInstance().getFile(editor.document)

    private fun localPath(file: VirtualFile): String? = if (file.isInLocalFileSystem) file.path else null

    private fun reportCaret(editor: Editor, feeder: EditorContextFeeder) {
        val file = fileOf(editor) ?: return
        val document = editor.document
        val offset = editor.caretModel.offset
        val line = document.getLineNumber(offset)
        feeder.caretMoved(localPath(file), line, offset - document.getLineStartOffset(line))
    }

    private fun reportSelection(editor: Editor, feeder: EditorContextFeeder) {
        val file = fileOf(editor) ?: return
        // Cut from the document's immutable chars by offsets: never copies a 50 MB selection
        // (SelectionModel.getSelectedText would, on every caret move).
        val sel = editor.selectionModel
        feeder.selectionChanged(localPath(file), SelectionText.capFrom(editor.document.immutableCharSequence, sel.selectionStart, sel.selectionEnd))
    }
}
