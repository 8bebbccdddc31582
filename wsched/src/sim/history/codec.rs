//! Histories as JSON files (with the `serde` feature). The codecs themselves are in
//! `observe/history.rs`: the cluster's messages use them too.

#[cfg(feature = "serde")]
pub use files::HistoryFileError;

/// Histories as JSON files.
#[cfg(feature = "serde")]
mod files {
    use std::fmt;
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::value::RawValue;

    use crate::observe::history::{Encoded, History, RecordedValue};

    /// The version of the file format [`History::save`] writes.
    const FORMAT: u32 = 1;

    /// What a history file holds.
    #[derive(Serialize)]
    struct FileOut<'a> {
        wsched_history: u32,
        history: &'a History,
    }

    /// What a history file holds, its history read after its version is checked.
    #[derive(Deserialize)]
    struct FileIn {
        wsched_history: u32,
        history: Box<RawValue>,
    }

    /// A value as a file holds it: `{"type": …}`, with `"codec"` and either
    /// `"json"` (the codec's JSON, as it is) or `"text"` (its text, as a string).
    #[derive(Serialize, Deserialize)]
    struct ValueRepr {
        #[serde(rename = "type")]
        type_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        codec: Option<String>,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        json: Option<Box<RawValue>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    }

    /// A field that is there: JSON `null` included (which an `Option` reads as
    /// `None`: the `()` codec's `null` would be lost).
    fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
        Box::<RawValue>::deserialize(d).map(Some)
    }

    impl Serialize for RecordedValue {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut repr = ValueRepr {
                type_name: self.type_name.clone(),
                codec: None,
                json: None,
                text: None,
            };
            if let Some(encoded) = &self.encoded {
                repr.codec = Some(encoded.codec.clone());
                // JSON that is not (a codec's bug) is kept as text.
                match RawValue::from_string(encoded.text.clone()).ok() {
                    Some(raw) if encoded.json => repr.json = Some(raw),
                    _ => repr.text = Some(encoded.text.clone()),
                }
            }
            repr.serialize(serializer)
        }
    }

    impl<'de> Deserialize<'de> for RecordedValue {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            use serde::de::Error;
            let repr = ValueRepr::deserialize(deserializer)?;
            let encoded = match (repr.codec, repr.json, repr.text) {
                (None, None, None) => None,
                (Some(codec), Some(json), None) => Some(Encoded::new(codec, json.get(), true)),
                (Some(codec), None, Some(text)) => Some(Encoded::new(codec, text, false)),
                _ => {
                    return Err(D::Error::custom(format!(
                        "the value of `{}` must have either no codec, or a \"codec\" and one of \
                         \"json\" and \"text\"",
                        repr.type_name
                    )))
                }
            };
            Ok(RecordedValue {
                type_name: repr.type_name,
                encoded,
            })
        }
    }

    /// A history file that could not be written or read.
    #[derive(Debug)]
    #[non_exhaustive]
    pub enum HistoryFileError {
        /// The file could not be read or written.
        Io {
            /// The file.
            path: PathBuf,
            /// Why.
            source: std::io::Error,
        },
        /// The text is not a history file (or a damaged one).
        Format {
            /// The file, if the text came from one.
            path: Option<PathBuf>,
            /// What the JSON parser says, with the line and column.
            source: serde_json::Error,
        },
        /// The file was written in a format version this version cannot read.
        Version {
            /// The file, if the text came from one.
            path: Option<PathBuf>,
            /// The file's version.
            found: u32,
        },
    }

    impl fmt::Display for HistoryFileError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let shown = |path: &Option<PathBuf>| match path {
                Some(path) => format!("`{}`", path.display()),
                None => "the text".to_owned(),
            };
            match self {
                Self::Io { path, source } => write!(
                    f,
                    "cannot access the history file `{}`: {source}; check the path and its \
                     permissions",
                    path.display()
                ),
                Self::Format { path, source } => write!(
                    f,
                    "{} is not a history file: {source}; history files are written by \
                     `History::save` (regenerate it rather than edit it by hand)",
                    shown(path)
                ),
                Self::Version { path, found } => write!(
                    f,
                    "{} is a history file of format version {found}, and this version of \
                     wsched reads version {FORMAT}; record the history again",
                    shown(path)
                ),
            }
        }
    }

    impl std::error::Error for HistoryFileError {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            match self {
                Self::Io { source, .. } => Some(source),
                Self::Format { source, .. } => Some(source),
                Self::Version { .. } => None,
            }
        }
    }

    impl History {
        /// The history as JSON, as [`save`](Self::save) writes it: pretty-printed,
        /// values with a JSON codec as JSON, others as strings, values kept by
        /// name as their type name alone.
        pub fn to_json(&self) -> String {
            let file = FileOut {
                wsched_history: FORMAT,
                history: self,
            };
            let mut text = serde_json::to_string_pretty(&file).expect("histories serialize");
            text.push('\n');
            text
        }

        /// Reads a history from the JSON [`to_json`](Self::to_json) writes.
        ///
        /// ```
        /// # use std::time::Duration;
        /// # use wsched::prelude::*;
        /// # use wsched::{Scheduler, SpawnOptions};
        /// use wsched::sim::history::History;
        /// # struct Nap;
        /// # #[process]
        /// # impl Nap {
        /// #     #[entry]
        /// #     fn nap(&mut self) -> Result<(), BoxError> {
        /// #         yield_cmd!(Sleep(Duration::from_millis(1)))?;
        /// #         Ok(())
        /// #     }
        /// # }
        /// # let scheduler = Scheduler::builder().workers(1).build()?;
        /// # let pid = scheduler.spawn_with(Nap, "nap", (), SpawnOptions::new().record_history())?;
        /// # scheduler.wait(pid)?;
        /// # let history = scheduler.take_history(pid).expect("recorded");
        ///
        /// let text = history.to_json();
        /// assert_eq!(History::from_json(&text)?, history);
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        ///
        /// # Errors
        /// [`HistoryFileError::Format`] for text that is not a history file,
        /// [`HistoryFileError::Version`] for one of another format version.
        pub fn from_json(text: &str) -> Result<History, HistoryFileError> {
            Self::parse(text, None)
        }

        /// Writes the history to the file `path` as JSON (see
        /// [`to_json`](Self::to_json)), replacing it whole: written beside it
        /// first, then renamed, so a reader never sees half a file.
        ///
        /// # Errors
        /// [`HistoryFileError::Io`] if the file cannot be written.
        pub fn save(&self, path: impl AsRef<Path>) -> Result<(), HistoryFileError> {
            let path = path.as_ref();
            let mut beside = path.as_os_str().to_owned();
            beside.push(".partial");
            let beside = PathBuf::from(beside);
            let io = |source| HistoryFileError::Io {
                path: path.to_owned(),
                source,
            };
            std::fs::write(&beside, self.to_json()).map_err(io)?;
            std::fs::rename(&beside, path).map_err(|source| {
                let _ = std::fs::remove_file(&beside);
                io(source)
            })
        }

        /// Reads the history [`save`](Self::save) wrote to the file `path`.
        ///
        /// # Errors
        /// [`HistoryFileError::Io`] if the file cannot be read, and as
        /// [`from_json`](Self::from_json).
        pub fn load(path: impl AsRef<Path>) -> Result<History, HistoryFileError> {
            let path = path.as_ref();
            let text = std::fs::read_to_string(path).map_err(|source| HistoryFileError::Io {
                path: path.to_owned(),
                source,
            })?;
            Self::parse(&text, Some(path))
        }

        fn parse(text: &str, path: Option<&Path>) -> Result<History, HistoryFileError> {
            let format = |source| HistoryFileError::Format {
                path: path.map(Path::to_owned),
                source,
            };
            let file: FileIn = serde_json::from_str(text).map_err(format)?;
            if file.wsched_history != FORMAT {
                return Err(HistoryFileError::Version {
                    path: path.map(Path::to_owned),
                    found: file.wsched_history,
                });
            }
            serde_json::from_str(file.history.get()).map_err(format)
        }
    }

    #[cfg(all(test, not(loom)))]
    mod tests {
        use super::*;
        use crate::observe::history::{Outcome, RecordedEvent, RecordedStep, RecordedYield};

        fn sample() -> History {
            History {
                process_type: "app::Worker".into(),
                entry: "run".into(),
                args: vec![
                    RecordedValue {
                        type_name: "u32".into(),
                        encoded: Some(Encoded::new("u32", "7", true)),
                    },
                    RecordedValue::by_name("app::Secret"),
                    RecordedValue {
                        type_name: "()".into(),
                        encoded: Some(Encoded::new("()", "null", true)),
                    },
                ],
                first_step: 1,
                steps: vec![RecordedStep {
                    number: 1,
                    events: vec![
                        RecordedEvent::Message {
                            from: Some(3),
                            value: RecordedValue {
                                type_name: "alloc::string::String".into(),
                                encoded: Some(Encoded::new("String", "{\"not\": json}", false)),
                            },
                        },
                        RecordedEvent::Cancel,
                    ],
                    yields: vec![RecordedYield {
                        tag: 1,
                        command: RecordedValue {
                            type_name: "app::Fetch".into(),
                            encoded: Some(Encoded::new("Fetch", "{\"url\": \"/a\"}", true)),
                        },
                    }],
                }],
                outcome: Outcome::Failed("boom".into()),
            }
        }

        #[test]
        fn a_history_comes_back_from_its_json_as_it_was() {
            let history = sample();
            let text = history.to_json();
            assert!(text.contains("\"json\": {\"url\": \"/a\"}"), "{text}");
            assert!(text.contains("\"text\": \"{\\\"not\\\": json}\""), "{text}");
            assert_eq!(History::from_json(&text).unwrap(), history);
        }

        #[test]
        fn a_file_of_another_version_is_refused_with_what_to_do() {
            let text =
                sample()
                    .to_json()
                    .replacen("\"wsched_history\": 1", "\"wsched_history\": 9", 1);
            let error = History::from_json(&text).unwrap_err();
            assert!(matches!(error, HistoryFileError::Version { found: 9, .. }));
            assert!(
                error.to_string().contains("record the history again"),
                "{error}"
            );
            let error = History::from_json("{}").unwrap_err();
            assert!(
                error.to_string().contains("is not a history file"),
                "{error}"
            );
        }
    }
}
