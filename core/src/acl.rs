//! Access control lists: the three policies an election needs, and any list
//! of ZooKeeper's own `(scheme, id, permissions)` entries, each entry checked
//! when it is made so that a list the server would refuse (`InvalidACL`) or
//! one that cannot work is refused before any request.
//!
//! ZooKeeper's schemes and what their ids look like:
//!
//! | scheme | id | who it grants |
//! |---|---|---|
//! | `world` | `anyone` | everyone |
//! | `auth` | (empty) | every identity the creating session has authenticated (replaced by them on the server) |
//! | `digest` | `user:base64(sha1(user:password))` | a session that added `digest` credentials `user:password` |
//! | `ip` | `10.1.2.3`, `10.0.0.0/8`, `fd00::/8` | a client connecting from that address or network |
//! | `sasl` | a principal (`svc/host@REALM`) | a session authenticated by SASL (Kerberos) as that principal |
//! | `x509` | a distinguished name | a client whose TLS certificate has that subject |
//!
//! ```
//! use zkelect_core::{Acl, AclEntry, Perms};
//! let acl = Acl::Custom(vec![
//!     "digest:svc:Dk6RtGyVWTTUyfSa87YMV3jqd5A=:cdrwa".parse()?,
//!     "ip:10.0.0.0/8:r".parse()?,
//!     AclEntry::new("x509", "CN=ops,O=example", Perms::READ | Perms::ADMIN)?,
//! ]);
//! assert!(acl.validate().is_ok());
//! assert!(Acl::Custom(vec![]).validate().is_err());
//! # Ok::<(), zkelect_core::AclError>(())
//! ```

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Permission bits of an ACL entry, as ZooKeeper numbers them. With the
/// `serde` feature it is the number, and a number with a bit ZooKeeper does
/// not define is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "u8", into = "u8")
)]
pub struct Perms(u8);

/// ZooKeeper's bits; a bit above `a` (16) is refused.
impl TryFrom<u8> for Perms {
    type Error = AclError;
    fn try_from(bits: u8) -> Result<Self, AclError> {
        Self::from_bits(i32::from(bits)).ok_or_else(|| {
            AclError::BadPerms(format!("{bits} has a bit ZooKeeper does not define"))
        })
    }
}

impl From<Perms> for u8 {
    fn from(perms: Perms) -> u8 {
        perms.0
    }
}

impl Perms {
    /// Read a node's data and list its children (`r`).
    pub const READ: Perms = Perms(1);
    /// Set a node's data (`w`).
    pub const WRITE: Perms = Perms(2);
    /// Create children (`c`).
    pub const CREATE: Perms = Perms(4);
    /// Delete children (`d`).
    pub const DELETE: Perms = Perms(8);
    /// Set the node's ACL (`a`).
    pub const ADMIN: Perms = Perms(16);
    /// Everything (`cdrwa`).
    pub const ALL: Perms = Perms(31);
    /// Nothing.
    pub const NONE: Perms = Perms(0);

    /// The bits as ZooKeeper sends them.
    pub fn bits(self) -> i32 {
        i32::from(self.0)
    }

    /// The permissions of `bits`, if every bit set is one ZooKeeper knows.
    pub fn from_bits(bits: i32) -> Option<Self> {
        u8::try_from(bits)
            .ok()
            .filter(|b| *b <= Self::ALL.0)
            .map(Perms)
    }

    /// Whether every permission of `other` is in `self`.
    pub fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no permission is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The letters ZooKeeper's shell uses (`cdrwa`, in that order).
    pub fn letters(self) -> String {
        [
            (Self::CREATE, 'c'),
            (Self::DELETE, 'd'),
            (Self::READ, 'r'),
            (Self::WRITE, 'w'),
            (Self::ADMIN, 'a'),
        ]
        .iter()
        .filter(|(p, _)| self.contains(*p))
        .map(|(_, c)| *c)
        .collect()
    }

    /// Parses letters of `cdrwa` (any order, each at most once).
    pub fn parse_letters(text: &str) -> Result<Self, AclError> {
        let mut perms = Perms::NONE;
        for c in text.chars() {
            let p = match c {
                'c' => Self::CREATE,
                'd' => Self::DELETE,
                'r' => Self::READ,
                'w' => Self::WRITE,
                'a' => Self::ADMIN,
                other => return Err(AclError::BadPerms(format!("unknown letter {other:?}"))),
            };
            if perms.contains(p) {
                return Err(AclError::BadPerms(format!("{c:?} given twice")));
            }
            perms = perms | p;
        }
        Ok(perms)
    }
}

impl std::ops::BitOr for Perms {
    type Output = Perms;
    fn bitor(self, rhs: Perms) -> Perms {
        Perms(self.0 | rhs.0)
    }
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.letters())
    }
}

/// The schemes ZooKeeper ships (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AclScheme {
    /// `world:anyone`.
    World,
    /// The creating session's own identities.
    Auth,
    /// A user and the base64 SHA-1 digest of `user:password`.
    Digest,
    /// A client address or network.
    Ip,
    /// A SASL (Kerberos) principal.
    Sasl,
    /// A TLS client certificate's subject.
    X509,
}

impl AclScheme {
    /// Every scheme.
    pub const ALL: [AclScheme; 6] = [
        Self::World,
        Self::Auth,
        Self::Digest,
        Self::Ip,
        Self::Sasl,
        Self::X509,
    ];

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::World => "world",
            Self::Auth => "auth",
            Self::Digest => "digest",
            Self::Ip => "ip",
            Self::Sasl => "sasl",
            Self::X509 => "x509",
        }
    }
}

impl FromStr for AclScheme {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        Self::ALL
            .into_iter()
            .find(|scheme| scheme.as_str() == s)
            .ok_or_else(|| AclError::UnknownScheme(s.chars().take(64).collect()))
    }
}

/// An ACL entry or list that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AclError {
    /// Not one of `world`, `auth`, `digest`, `ip`, `sasl`, `x509`.
    #[error("unknown ACL scheme {0:?}: ZooKeeper knows world, auth, digest, ip, sasl and x509")]
    UnknownScheme(String),
    /// The id does not fit its scheme.
    #[error("invalid {scheme} id {id:?}: {reason}")]
    BadId {
        /// The entry's scheme.
        scheme: &'static str,
        /// The id given (cut to 64 characters).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The permissions are empty or hold bits ZooKeeper does not know.
    #[error("invalid ACL permissions: {0}")]
    BadPerms(String),
    /// An entry's text is not `scheme:id:perms`.
    #[error("invalid ACL entry {0:?}: expected scheme:id:perms, e.g. world:anyone:r or digest:user:BASE64:cdrwa")]
    Syntax(String),
    /// A custom list with no entry: the server refuses it.
    #[error("a custom ACL needs at least one entry")]
    Empty,
    /// No entry grants this permission, which every participant needs: a
    /// queue's nodes must be listed and read (`r`), created (`c`) and
    /// deleted (`d`) under the queue's path.
    #[error("no entry of the ACL grants {0:?}, which every participant of a queue needs (r to list and read it, c to join, d to leave)")]
    Missing(char),
}

/// One entry of a custom ACL: a scheme, an id that fits it, and the
/// permissions it grants. Made only through [`AclEntry::new`] or its
/// [`FromStr`], which check the id against the scheme, so an entry the server
/// would refuse cannot be written down.
///
/// With the `serde` feature an entry is its `scheme:id:perms` text, checked
/// as [`FromStr`] checks it when read back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "String", into = "String")
)]
pub struct AclEntry {
    scheme: AclScheme,
    id: String,
    perms: Perms,
}

impl AclEntry {
    /// An entry, checked:
    ///
    /// - `world`: the id is `anyone`;
    /// - `auth`: the id is empty (the server replaces the entry by the
    ///   creating session's identities; an id would be ignored);
    /// - `digest`: `user:hash`, the user non-empty and without `:`, the hash
    ///   the base64 of a 20-byte SHA-1 digest (28 characters);
    /// - `ip`: an IPv4 or IPv6 address, optionally `/bits` (at most 32 or 128);
    /// - `sasl`, `x509`: non-empty;
    /// - the permissions: at least one.
    ///
    /// ```
    /// use zkelect_core::{AclEntry, AclError, Perms};
    /// assert!(AclEntry::new("ip", "10.0.0.0/8", Perms::ALL).is_ok());
    /// assert!(matches!(AclEntry::new("ip", "10.0.0.0/33", Perms::ALL), Err(AclError::BadId { .. })));
    /// assert!(matches!(AclEntry::new("digest", "user:password", Perms::ALL), Err(AclError::BadId { .. })));
    /// assert!(matches!(AclEntry::new("world", "anyone", Perms::NONE), Err(AclError::BadPerms(_))));
    /// ```
    pub fn new(scheme: &str, id: &str, perms: Perms) -> Result<Self, AclError> {
        let scheme: AclScheme = scheme.parse()?;
        check_id(scheme, id)?;
        if perms.is_empty() {
            return Err(AclError::BadPerms(
                "an entry must grant at least one of cdrwa".into(),
            ));
        }
        Ok(Self {
            scheme,
            id: id.to_owned(),
            perms,
        })
    }

    /// `world:anyone` with `perms`.
    pub fn anyone(perms: Perms) -> Self {
        Self {
            scheme: AclScheme::World,
            id: "anyone".into(),
            perms,
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> AclScheme {
        self.scheme
    }

    /// The id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The permissions granted.
    pub fn perms(&self) -> Perms {
        self.perms
    }
}

/// `scheme:id:perms`, as ZooKeeper's shell writes it (`digest:user:HASH:cdrwa`).
impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.scheme.as_str(), self.id, self.perms)
    }
}

/// Parses `scheme:id:perms` as ZooKeeper's shell does: the scheme up to the
/// first `:`, the permissions after the last, the id between (it may hold
/// `:` itself: a digest's `user:hash`, an IPv6 address). The permissions are
/// letters of `cdrwa`.
///
/// ```
/// use zkelect_core::{AclEntry, AclScheme, Perms};
/// let e: AclEntry = "ip:fd00::/8:rw".parse()?;
/// assert_eq!((e.scheme(), e.id(), e.perms()), (AclScheme::Ip, "fd00::/8", Perms::READ | Perms::WRITE));
/// assert_eq!(e.to_string(), "ip:fd00::/8:rw");
/// assert!("world:anyone".parse::<AclEntry>().is_err());
/// # Ok::<(), zkelect_core::AclError>(())
/// ```
impl FromStr for AclEntry {
    type Err = AclError;
    fn from_str(text: &str) -> Result<Self, AclError> {
        let syntax = || AclError::Syntax(text.chars().take(200).collect());
        let (scheme, rest) = text.split_once(':').ok_or_else(syntax)?;
        let (id, perms) = rest.rsplit_once(':').ok_or_else(syntax)?;
        Self::new(scheme, id, Perms::parse_letters(perms)?)
    }
}

/// The [`FromStr`] parse of an owned string.
impl TryFrom<String> for AclEntry {
    type Error = AclError;
    fn try_from(text: String) -> Result<Self, AclError> {
        text.parse()
    }
}

/// The [`Display`](fmt::Display) form, `scheme:id:perms`.
impl From<AclEntry> for String {
    fn from(entry: AclEntry) -> String {
        entry.to_string()
    }
}

fn check_id(scheme: AclScheme, id: &str) -> Result<(), AclError> {
    let bad = |reason| {
        Err(AclError::BadId {
            scheme: scheme.as_str(),
            id: id.chars().take(64).collect(),
            reason,
        })
    };
    match scheme {
        AclScheme::World if id != "anyone" => bad("the world scheme's only id is \"anyone\""),
        AclScheme::Auth if !id.is_empty() => bad(
            "the auth scheme takes no id: the server grants the creating session's own identities",
        ),
        AclScheme::Digest => {
            let Some((user, hash)) = id.rsplit_once(':') else {
                return bad("expected user:base64(sha1(user:password))");
            };
            if user.is_empty() || user.contains(':') {
                return bad("the user must be non-empty and hold no ':'");
            }
            if !is_sha1_base64(hash) {
                return bad(
                    "the hash must be the base64 of a 20-byte SHA-1 digest (28 characters ending in '='), not a password",
                );
            }
            Ok(())
        }
        AclScheme::Ip => match parse_network(id) {
            Some(_) => Ok(()),
            None => bad("expected an IPv4 or IPv6 address, optionally /bits (at most 32 or 128)"),
        },
        AclScheme::Sasl | AclScheme::X509 if id.is_empty() => bad("must not be empty"),
        _ if id.chars().any(char::is_control) => bad("holds a control character"),
        _ => Ok(()),
    }
}

/// Whether `text` is the standard base64 of exactly 20 bytes: 27 characters
/// of the alphabet, the last of which leaves its two low bits zero, then `=`.
fn is_sha1_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 28 || bytes[27] != b'=' {
        return false;
    }
    let value = |b: u8| -> Option<u8> {
        match b {
            b'A'..=b'Z' => Some(b - b'A'),
            b'a'..=b'z' => Some(b - b'a' + 26),
            b'0'..=b'9' => Some(b - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let Some(values) = bytes[..27]
        .iter()
        .map(|&b| value(b))
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    // 27 characters carry 162 bits, of which 160 are the digest.
    values[26] & 0b11 == 0
}

/// An address and the number of its leading bits that count.
pub(crate) fn parse_network(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = match text.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (text, None),
    };
    let addr: IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits = match bits {
        None => max,
        Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) && b.len() <= 3 => {
            b.parse::<u8>().ok().filter(|n| *n <= max)?
        }
        Some(_) => return None,
    };
    Some((addr, bits))
}

/// Whether `client` (an address) is inside `network` (`addr[/bits]`), as
/// ZooKeeper's `IPAuthenticationProvider` matches: the leading bits agree,
/// and an address of the other family never matches.
///
/// ```
/// use zkelect_core::acl::ip_matches;
/// assert!(ip_matches("10.0.0.0/8", "10.9.8.7"));
/// assert!(!ip_matches("10.0.0.0/8", "11.0.0.1"));
/// assert!(ip_matches("127.0.0.1", "127.0.0.1"));
/// assert!(!ip_matches("::1", "127.0.0.1"));
/// ```
pub fn ip_matches(network: &str, client: &str) -> bool {
    let (Some((net, bits)), Ok(client)) = (parse_network(network), client.parse::<IpAddr>()) else {
        return false;
    };
    let (net, client): (Vec<u8>, Vec<u8>) = match (net, client) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (a.octets().to_vec(), b.octets().to_vec()),
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.octets().to_vec(), b.octets().to_vec()),
        _ => return false,
    };
    let bits = usize::from(bits);
    let whole = bits / 8;
    if net[..whole] != client[..whole] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    net[whole] & mask == client[whole] & mask
}

/// The access control a created node gets: three fixed policies, or a list
/// of ZooKeeper's own entries.
///
/// Transports translate it into their client's ACL lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Acl {
    /// `world:anyone` may do anything (ZooKeeper's `OPEN_ACL_UNSAFE`).
    #[default]
    Open,
    /// Only the authenticated creator may do anything (`CREATOR_ALL_ACL`); needs auth.
    CreatorAll,
    /// The creator may do anything, everyone may read: lets unauthenticated
    /// observers and `zkelect status` see the queue while nobody else can change it.
    CreatorAllWorldRead,
    /// Any list of entries ([`AclEntry`]: `ip`, `x509`, several digest
    /// users…). Checked by [`Acl::validate`] (and so by
    /// [`ConfigBuilder::build`](crate::ConfigBuilder::build)): at least one
    /// entry, and between them the `r`, `c` and `d` every participant needs.
    Custom(Vec<AclEntry>),
}

impl Acl {
    /// The list as entries (what a transport sends): `auth` entries where
    /// the creator is meant.
    pub fn entries(&self) -> Vec<AclEntry> {
        let auth = |perms| AclEntry {
            scheme: AclScheme::Auth,
            id: String::new(),
            perms,
        };
        match self {
            Self::Open => vec![AclEntry::anyone(Perms::ALL)],
            Self::CreatorAll => vec![auth(Perms::ALL)],
            Self::CreatorAllWorldRead => vec![auth(Perms::ALL), AclEntry::anyone(Perms::READ)],
            Self::Custom(list) => list.clone(),
        }
    }

    /// Whether the list grants everyone everything.
    pub fn is_open(&self) -> bool {
        match self {
            Self::Open => true,
            Self::Custom(list) => list
                .iter()
                .any(|e| e.scheme == AclScheme::World && e.perms == Perms::ALL),
            Self::CreatorAll | Self::CreatorAllWorldRead => false,
        }
    }

    /// Whether the server needs the creating session to be authenticated
    /// (it refuses an `auth` entry of a session with no identity: `InvalidACL`).
    pub fn needs_auth(&self) -> bool {
        match self {
            Self::Open => false,
            Self::CreatorAll | Self::CreatorAllWorldRead => true,
            Self::Custom(list) => list.iter().any(|e| e.scheme == AclScheme::Auth),
        }
    }

    /// Checks a custom list: at least one entry, and `r`, `c` and `d`
    /// granted by some entry (each entry was checked when it was made).
    /// The fixed policies always pass.
    pub fn validate(&self) -> Result<(), AclError> {
        let Self::Custom(list) = self else {
            return Ok(());
        };
        if list.is_empty() {
            return Err(AclError::Empty);
        }
        let granted = list.iter().fold(Perms::NONE, |all, e| all | e.perms);
        for (perm, letter) in [
            (Perms::READ, 'r'),
            (Perms::CREATE, 'c'),
            (Perms::DELETE, 'd'),
        ] {
            if !granted.contains(perm) {
                return Err(AclError::Missing(letter));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "Dk6RtGyVWTTUyfSa87YMV3jqd5A=";

    /// Which error an entry's text must give.
    type Kind = fn(&AclError) -> bool;

    /// (text, parses) for entries of every scheme.
    #[test]
    fn entries_parse_as_the_zookeeper_shell_writes_them() {
        let good = [
            "world:anyone:cdrwa",
            "auth::cdrwa",
            &format!("digest:svc:{HASH}:cdrwa"),
            &format!("digest:other-user:{HASH}:r"),
            "ip:10.0.0.1:r",
            "ip:10.0.0.0/8:cdr",
            "ip:0.0.0.0/0:r",
            "ip:::1:rw",
            "ip:fd00::/8:a",
            "ip:2001:db8::/128:c",
            "sasl:zk/host@EXAMPLE.COM:cdrwa",
            "x509:CN=ops,O=Example:r",
        ];
        for text in good {
            let entry: AclEntry = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(entry.to_string(), *text);
        }
        let bad: &[(&str, Kind)] = &[
            ("world:anyone", |e| matches!(e, AclError::Syntax(_))),
            ("nothing", |e| matches!(e, AclError::Syntax(_))),
            ("world:someone:r", |e| matches!(e, AclError::BadId { .. })),
            ("auth:me:r", |e| matches!(e, AclError::BadId { .. })),
            ("digest:svc:password:r", |e| {
                matches!(e, AclError::BadId { .. })
            }),
            ("digest::Dk6RtGyVWTTUyfSa87YMV3jqd5A=:r", |e| {
                matches!(e, AclError::BadId { .. })
            }),
            // 28 characters, but the last before '=' leaves low bits set.
            ("digest:svc:Dk6RtGyVWTTUyfSa87YMV3jqd5B=:r", |e| {
                matches!(e, AclError::BadId { .. })
            }),
            ("digest:svc:Dk6RtGyVWTTUyfSa87YMV3jqd5A:r", |e| {
                matches!(e, AclError::BadId { .. })
            }),
            ("ip:10.0.0.0/33:r", |e| matches!(e, AclError::BadId { .. })),
            ("ip:10.0.0/8:r", |e| matches!(e, AclError::BadId { .. })),
            ("ip:10.0.0.0/:r", |e| matches!(e, AclError::BadId { .. })),
            ("ip:10.0.0.0/+8:r", |e| matches!(e, AclError::BadId { .. })),
            ("ip:fd00::/129:r", |e| matches!(e, AclError::BadId { .. })),
            ("ip:host.example:r", |e| matches!(e, AclError::BadId { .. })),
            ("sasl::r", |e| matches!(e, AclError::BadId { .. })),
            ("x509::r", |e| matches!(e, AclError::BadId { .. })),
            ("kerberos:me:r", |e| matches!(e, AclError::UnknownScheme(_))),
            ("world:anyone:", |e| matches!(e, AclError::BadPerms(_))),
            ("world:anyone:rx", |e| matches!(e, AclError::BadPerms(_))),
            ("world:anyone:rr", |e| matches!(e, AclError::BadPerms(_))),
        ];
        for (text, want) in bad {
            let err = text.parse::<AclEntry>().unwrap_err();
            assert!(want(&err), "{text}: {err:?}");
        }
    }

    #[test]
    fn a_custom_list_needs_an_entry_and_read_create_delete_between_them() {
        let digest = |user: &str, perms| AclEntry::new("digest", &format!("{user}:{HASH}"), perms);
        assert_eq!(Acl::Custom(vec![]).validate(), Err(AclError::Empty));
        assert_eq!(
            Acl::Custom(vec![AclEntry::anyone(Perms::READ)]).validate(),
            Err(AclError::Missing('c'))
        );
        let two_users = Acl::Custom(vec![
            digest("a", Perms::READ | Perms::CREATE).unwrap(),
            digest("b", Perms::DELETE).unwrap(),
        ]);
        assert_eq!(two_users.validate(), Ok(()));
        assert!(!two_users.is_open() && !two_users.needs_auth());
        for fixed in [Acl::Open, Acl::CreatorAll, Acl::CreatorAllWorldRead] {
            assert_eq!(fixed.validate(), Ok(()));
        }
        assert_eq!(
            Acl::CreatorAllWorldRead.entries(),
            vec![
                AclEntry::new("auth", "", Perms::ALL).unwrap(),
                AclEntry::anyone(Perms::READ)
            ]
        );
    }

    #[test]
    fn perms_round_trip_through_letters_and_bits() {
        for bits in 1..=31 {
            let p = Perms::from_bits(bits).unwrap();
            assert_eq!(Perms::parse_letters(&p.letters()), Ok(p));
            assert_eq!(p.bits(), bits);
        }
        assert_eq!(Perms::from_bits(32), None);
        assert_eq!(Perms::from_bits(-1), None);
        assert_eq!(Perms::ALL.letters(), "cdrwa");
    }

    /// (network, client) → matches, as ZooKeeper's IP provider judges.
    #[test]
    fn ip_networks_match_by_their_leading_bits() {
        let cases = [
            ("10.0.0.0/8", "10.255.0.1", true),
            ("10.0.0.0/8", "9.255.0.1", false),
            ("10.1.2.3", "10.1.2.3", true),
            ("10.1.2.3", "10.1.2.4", false),
            ("10.1.2.0/23", "10.1.3.9", true),
            ("10.1.2.0/23", "10.1.4.9", false),
            ("0.0.0.0/0", "192.168.1.1", true),
            ("fd00::/8", "fd12::1", true),
            ("fd00::/8", "fe80::1", false),
            ("::1", "::1", true),
            ("127.0.0.1", "::1", false),
            ("bogus", "127.0.0.1", false),
        ];
        for (net, client, want) in cases {
            assert_eq!(ip_matches(net, client), want, "{net} {client}");
        }
    }
}
