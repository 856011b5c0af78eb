//! Font discovery and loading for the PDF renderer (see the parent module).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use krilla::text::Font;

use crate::error::{Error, Result, Status};

/// Text styles, each with its own face fallback chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Face {
    Regular = 0,
    Bold = 1,
    Italic = 2,
    BoldItalic = 3,
    Mono = 4,
}

pub(super) const SANS_FAMILIES: &[&str] = &["Noto Sans CJK KR", "NanumGothic", "DejaVu Sans"];
pub(super) const MONO_FAMILIES: &[&str] = &[
    "DejaVu Sans Mono",
    "NanumGothicCoding",
    "Noto Sans Mono CJK KR",
];

/// One loaded face: the font file's bytes (shared by every face of the file)
/// and its krilla font.
pub(super) struct LoadedFace {
    pub(super) data: Arc<Vec<u8>>,
    pub(super) index: u32,
    pub(super) font: Font,
    /// PostScript name (for diagnostics and tests).
    pub(super) name: String,
}

/// The fonts a render uses: loaded faces plus, per style, the chain of face
/// indexes to try in order. `Send + Sync`; kept for the process.
pub(crate) struct FontSet {
    pub(super) db: fontdb::Database,
    pub(super) faces: Mutex<Vec<Arc<LoadedFace>>>,
    pub(super) files: Mutex<HashMap<PathBuf, Arc<Vec<u8>>>>,
    pub(super) chains: [Vec<usize>; 5],
    /// Last-resort faces found for characters outside every chain
    /// (`None`: no system font has it).
    pub(super) extra: Mutex<HashMap<char, Option<usize>>>,
}

static SYSTEM_FONTS: Mutex<Option<Arc<FontSet>>> = Mutex::new(None);

/// The system font set, scanned on first use. A failure (no usable font) is
/// not cached, so installing fonts later is picked up.
pub(super) fn system_fonts() -> Result<Arc<FontSet>> {
    let mut slot = SYSTEM_FONTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = slot.as_ref() {
        return Ok(f.clone());
    }
    let mut db = fontdb::Database::new();
    db.load_system_fonts();
    let set = Arc::new(FontSet::from_db(db)?);
    *slot = Some(set.clone());
    Ok(set)
}

pub(super) fn is_bold(info: &fontdb::FaceInfo) -> bool {
    info.weight.0 >= 600
}

pub(super) fn is_slanted(info: &fontdb::FaceInfo) -> bool {
    info.style != fontdb::Style::Normal
}

impl FontSet {
    /// Builds the chains from a font database; an error when no face of any
    /// preferred family (nor any other font) can be loaded.
    pub(crate) fn from_db(db: fontdb::Database) -> Result<FontSet> {
        let mut set = FontSet {
            db,
            faces: Mutex::new(Vec::new()),
            files: Mutex::new(HashMap::new()),
            chains: Default::default(),
            extra: Mutex::new(HashMap::new()),
        };
        let pick = |set: &FontSet, families: &[&str], bold: bool, slanted: bool| -> Vec<usize> {
            families
                .iter()
                .filter_map(|fam| {
                    let info = set.db.faces().find(|f| {
                        f.stretch == fontdb::Stretch::Normal
                            && is_bold(f) == bold
                            && is_slanted(f) == slanted
                            && (bold || f.weight.0 >= 350)
                            && f.families.iter().any(|(n, _)| n.eq_ignore_ascii_case(fam))
                    })?;
                    set.load(info.id)
                })
                .collect()
        };
        let regular = pick(&set, SANS_FAMILIES, false, false);
        let bold = pick(&set, SANS_FAMILIES, true, false);
        let italic = pick(&set, SANS_FAMILIES, false, true);
        let bold_italic = pick(&set, SANS_FAMILIES, true, true);
        let mono = pick(&set, MONO_FAMILIES, false, false);
        let join = |parts: &[&Vec<usize>]| -> Vec<usize> {
            let mut out = Vec::new();
            for p in parts {
                for &i in p.iter() {
                    if !out.contains(&i) {
                        out.push(i);
                    }
                }
            }
            out
        };
        let mut regular_chain = join(&[&regular, &mono]);
        if regular_chain.is_empty() {
            // None of the preferred families: any regular upright font.
            let any = set
                .db
                .faces()
                .filter(|f| !is_bold(f) && !is_slanted(f))
                .map(|f| f.id)
                .collect::<Vec<_>>();
            if let Some(i) = any.into_iter().find_map(|id| set.load(id)) {
                regular_chain.push(i);
            }
        }
        if regular_chain.is_empty() {
            return Err(Error::new(
                Status::Io,
                "no usable font: install the DejaVu fonts and a Korean font \
                 (Debian/Ubuntu: apt-get install fonts-dejavu-core fonts-nanum)",
            ));
        }
        set.chains = [
            regular_chain.clone(),
            join(&[&bold, &regular_chain]),
            join(&[&italic, &regular_chain]),
            join(&[&bold_italic, &bold, &italic, &regular_chain]),
            join(&[&mono, &regular_chain]),
        ];
        Ok(set)
    }

    /// Loads one face (reading its file once for all its faces).
    pub(super) fn load(&self, id: fontdb::ID) -> Option<usize> {
        let (source, index) = self.db.face_source(id)?;
        let name = self.db.face(id)?.post_script_name.clone();
        let data = match source {
            fontdb::Source::File(path) | fontdb::Source::SharedFile(path, _) => {
                let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
                match files.get(&path) {
                    Some(d) => d.clone(),
                    None => {
                        let d = Arc::new(std::fs::read(&path).ok()?);
                        files.insert(path, d.clone());
                        d
                    }
                }
            }
            fontdb::Source::Binary(b) => Arc::new((*b).as_ref().to_vec()),
        };
        let mut faces = self.faces.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = faces
            .iter()
            .position(|f| Arc::ptr_eq(&f.data, &data) && f.index == index)
        {
            return Some(i);
        }
        // Must be shapeable and drawable.
        rustybuzz::Face::from_slice(&data, index)?;
        let font = Font::new(data.clone().into(), index)?;
        faces.push(Arc::new(LoadedFace {
            data,
            index,
            font,
            name,
        }));
        Some(faces.len() - 1)
    }

    /// For characters outside every chain: one scan over all system faces
    /// finds, per character, the first face that has it (loaded then).
    /// Results, negative ones included, are kept for later renders.
    pub(super) fn resolve_extra(&self, chars: &[char]) {
        let mut extra = self.extra.lock().unwrap_or_else(|p| p.into_inner());
        let mut todo: Vec<char> = chars
            .iter()
            .copied()
            .filter(|c| !extra.contains_key(c))
            .collect();
        if todo.is_empty() {
            return;
        }
        let ids: Vec<fontdb::ID> = self.db.faces().map(|f| f.id).collect();
        for id in ids {
            if todo.is_empty() {
                break;
            }
            let has: Vec<char> = self
                .db
                .with_face_data(id, |data, index| {
                    match rustybuzz::ttf_parser::Face::parse(data, index) {
                        Ok(f) => todo
                            .iter()
                            .copied()
                            .filter(|&c| f.glyph_index(c).is_some())
                            .collect(),
                        Err(_) => Vec::new(),
                    }
                })
                .unwrap_or_default();
            if has.is_empty() {
                continue;
            }
            if let Some(i) = self.load(id) {
                for c in has {
                    extra.insert(c, Some(i));
                }
                todo.retain(|c| !extra.contains_key(c));
            }
        }
        for c in todo {
            extra.insert(c, None);
        }
    }
}

impl FontSet {
    /// Makes sure every character of the document that the chains lack has
    /// been looked up among all system fonts (see [`FontSet::resolve_extra`]).
    pub(super) fn prepare(&self, chars: impl Iterator<Item = char>) {
        let faces = self.faces.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let parsed: Vec<rustybuzz::ttf_parser::Face<'_>> = self.chains[Face::Regular as usize]
            .iter()
            .filter_map(|&i| {
                rustybuzz::ttf_parser::Face::parse(&faces[i].data, faces[i].index).ok()
            })
            .collect();
        let mut seen = BTreeSet::new();
        let lacking: Vec<char> = chars
            .filter(|c| !c.is_control() && !c.is_whitespace() && seen.insert(*c))
            .filter(|&c| !parsed.iter().any(|f| f.glyph_index(c).is_some()))
            .collect();
        if !lacking.is_empty() {
            self.resolve_extra(&lacking);
        }
    }
}

#[cfg(test)]
mod tests;
