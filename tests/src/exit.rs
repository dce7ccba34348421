//! How a finished command went: its exit code and what it said.

/// Asserts that a command (`what`, for the message) exited with `want` and
/// that its `output` (stderr, or a log) contains each of `says`; the output
/// is shown in full when either does not hold.
///
/// ```
/// zkelect_tests::assert_exit("sh -c 'exit 3'", Some(3), 3, "exited with code 3", &["code 3"]);
/// ```
///
/// # Panics
///
/// When the code differs (or the command was killed by a signal: `None`),
/// or the output lacks one of `says`.
#[track_caller]
pub fn assert_exit(what: &str, code: Option<i32>, want: i32, output: &str, says: &[&str]) {
    assert_eq!(code, Some(want), "{what}: exit code; output:\n{output}");
    for needle in says {
        assert!(
            output.contains(needle),
            "{what}: the output lacks {needle:?}:\n{output}"
        );
    }
}
