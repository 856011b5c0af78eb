"""IntelliJ Platform API stubs for the editor tools, "Add … to Qwen Prompt",
health, log and close-all-diffs glue (examples/intellij/src/main/kotlin/
qwen/companion/intellij/{IdeEditorModel,QwenTerminals,AddToPromptActions,
CompanionActions}.kt), merged into intellij_api_stubs.py's tables by
extend() after intellij_ui_stubs: NEW classes, EXTRA members, and
REPLACED declarations (a class whose header changes). Signatures copied by
hand from the platform sources (2024.3: DaemonCodeAnalyzerEx,
HighlightInfo, HighlightSeverity, TerminalWidget, TerminalToolWindowManager,
jediterm's TtyConnector, IdeFocusManager); like the base table they only let kotlinc
type-check the glue, they are not the SDK.
"""

import intellij_ui_stubs

P = "com.intellij.openapi.project.Project"
VF = "com.intellij.openapi.vfs.VirtualFile"

NEW = {
    # highlighting (the editor_diagnostics tool)
    "com.intellij.util.Processor":
        "@FunctionalInterface public interface Processor<T> { boolean process(T t); }",
    "com.intellij.lang.annotation.HighlightSeverity":
        "public class HighlightSeverity implements Comparable<HighlightSeverity> { public final String myName = null; public final int myVal = 0; "
        "public static final HighlightSeverity INFORMATION = null; public static final HighlightSeverity WEAK_WARNING = null; "
        "public static final HighlightSeverity WARNING = null; public static final HighlightSeverity ERROR = null; "
        "public String getName(){return null;} public int compareTo(HighlightSeverity o){return 0;} }",
    "com.intellij.codeInsight.daemon.impl.HighlightInfo":
        "public class HighlightInfo { public com.intellij.lang.annotation.HighlightSeverity getSeverity(){return null;} public String getDescription(){return null;} "
        "public int getStartOffset(){return 0;} public int getEndOffset(){return 0;} @org.jetbrains.annotations.Nullable public String getInspectionToolId(){return null;} }",
    "com.intellij.codeInsight.daemon.impl.DaemonCodeAnalyzerEx":
        "public abstract class DaemonCodeAnalyzerEx { public static boolean processHighlights(com.intellij.openapi.editor.Document document, " + P + " project, "
        "@org.jetbrains.annotations.Nullable com.intellij.lang.annotation.HighlightSeverity minSeverity, int startOffset, int endOffset, "
        "com.intellij.util.Processor<? super HighlightInfo> processor){return true;} }",
    # editor navigation
    "com.intellij.openapi.editor.ScrollType":
        "public enum ScrollType { RELATIVE, CENTER, MAKE_VISIBLE, CENTER_UP, CENTER_DOWN }",
    "com.intellij.openapi.editor.ScrollingModel":
        "public interface ScrollingModel { void scrollToCaret(ScrollType scrollType); }",
    # terminal typing (jediterm)
    "com.jediterm.terminal.TtyConnector":
        "public interface TtyConnector { void write(byte[] bytes) throws java.io.IOException; void write(String string) throws java.io.IOException; boolean isConnected(); }",
    # the project the user works in
    "com.intellij.openapi.wm.IdeFrame":
        "public interface IdeFrame { @org.jetbrains.annotations.Nullable " + P + " getProject(); }",
    "com.intellij.openapi.wm.IdeFocusManager":
        "public abstract class IdeFocusManager { public static IdeFocusManager getGlobalInstance(){return null;} @org.jetbrains.annotations.Nullable public abstract IdeFrame getLastFocusedFrame(); }",
    # the log view
    "com.intellij.testFramework.LightVirtualFile":
        "public class LightVirtualFile extends " + VF + " { public LightVirtualFile(String name, CharSequence content){} public void setWritable(boolean writable){} "
        "public boolean isDirectory(){return false;} public byte[] contentsToByteArray(){return new byte[0];} public String getPath(){return null;} }",
}

# Declarations replaced whole: the real TerminalWidget is a ComponentContainer (a Disposable).
REPLACED = {
    "com.intellij.terminal.ui.TerminalWidget":
        "public interface TerminalWidget extends com.intellij.openapi.Disposable { void sendCommandToExecute(String shellCommand); "
        "default com.jediterm.terminal.TtyConnector getTtyConnector(){return null;} boolean hasFocus(); void requestFocus(); "
        "void addTerminationCallback(Runnable onTerminated, com.intellij.openapi.Disposable parentDisposable); }",
}

EXTRA = {
    "org.jetbrains.plugins.terminal.TerminalToolWindowManager": [
        "@org.jetbrains.annotations.Nullable public com.intellij.openapi.wm.ToolWindow getToolWindow(){return null;}",
        "@org.jetbrains.annotations.Nullable public static com.intellij.terminal.ui.TerminalWidget findWidgetByContent(com.intellij.ui.content.Content content){return null;}",
    ],
    "com.intellij.openapi.wm.ToolWindow": [
        "void activate(Runnable runnable, boolean autoFocusContents, boolean forced);",
    ],
    "com.intellij.ui.content.ContentManager": [
        "void setSelectedContent(Content content, boolean requestFocus);",
        "@org.jetbrains.annotations.Nullable Content getSelectedContent();",
    ],
    # the Add … to Prompt actions name the agent in their text
    "com.intellij.openapi.actionSystem.Presentation": [
        "public String getText(){return null;}",
        "public void setText(String text){}",
    ],
    "com.intellij.openapi.actionSystem.CommonDataKeys": [
        "public static final DataKey<" + VF + "> VIRTUAL_FILE = null;",
    ],
    "com.intellij.openapi.vfs.VirtualFile": [
        "public com.intellij.openapi.fileTypes.FileType getFileType(){return null;}",
    ],
    "com.intellij.openapi.fileTypes.FileType": [
        "String getName();",
    ],
    "com.intellij.openapi.editor.Editor": [
        "javax.swing.JComponent getContentComponent();",
        "ScrollingModel getScrollingModel();",
    ],
    "com.intellij.openapi.editor.CaretModel": [
        "void moveToOffset(int offset);",
    ],
    "com.intellij.openapi.editor.SelectionModel": [
        "void setSelection(int startOffset, int endOffset);",
    ],
    "com.intellij.openapi.editor.Document": [
        "int getLineCount();",
        "int getLineEndOffset(int line);",
    ],
    "com.intellij.openapi.fileEditor.FileDocumentManager": [
        "public abstract boolean isFileModified(" + VF + " file);",
    ],
    "com.intellij.openapi.fileEditor.OpenFileDescriptor": [
        "public OpenFileDescriptor(" + P + " project, " + VF + " file, int offset){}",
        "public OpenFileDescriptor(" + P + " project, " + VF + " file){}",
    ],
    "com.intellij.openapi.ui.Messages": [
        "public static void showErrorDialog(" + P + " project, String message, String title){}",
        "public static void showWarningDialog(" + P + " project, String message, String title){}",
        "public static void showInfoMessage(" + P + " project, String message, String title){}",
    ],
}


def extend(java, kotlin):
    for fq, body in NEW.items():
        if fq in java:
            raise SystemExit("intellij_editor_stubs: %s exists" % fq)
        java[fq] = body
    for fq, body in REPLACED.items():
        if fq not in java:
            raise SystemExit("intellij_editor_stubs: %s is not in the base table" % fq)
        java[fq] = body
    for fq, extra in EXTRA.items():
        if fq not in java:
            raise SystemExit("intellij_editor_stubs: %s is not in the base table" % fq)
        intellij_ui_stubs.add_members(java, fq, extra)
