//! Pins: date tags (YYYYMMDD-HHMMSS from the image's OCI created label) that keep an image
//! alive after its channel tag moves on, so a later refresh cannot take it away.

use chrono::{DateTime, Utc};

use crate::container_engine::ImageInfo;
use crate::labels;

/// The pin tag for an image: its `org.opencontainers.image.created` label, else its creation time.
pub fn pin_tag(image: &ImageInfo) -> Option<String> {
    let created = image.labels.get(labels::OCI_CREATED).or(image.created.as_ref())?;
    let time: DateTime<Utc> = DateTime::parse_from_rfc3339(created.trim()).ok()?.with_timezone(&Utc);
    Some(time.format("%Y%m%d-%H%M%S").to_string())
}

/// True for tags shaped like a pin.
pub fn is_pin(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    bytes.len() == 15 && bytes[8] == b'-' && bytes.iter().enumerate().all(|(i, b)| i == 8 || b.is_ascii_digit())
}

/// The pin tags an image carries in `repository`, newest first.
pub fn pins_in(image: &ImageInfo, repository: &str) -> Vec<String> {
    let mut pins: Vec<String> = image
        .repo_tags
        .iter()
        .filter_map(|t| t.strip_prefix(repository)?.strip_prefix(':'))
        .filter(|t| is_pin(t))
        .map(str::to_string)
        .collect();
    pins.sort_by(|a, b| b.cmp(a));
    pins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_from_label_or_created() {
        let mut image = ImageInfo::default();
        assert_eq!(pin_tag(&image), None);
        image.created = Some("2026-11-02T03:04:05.123456789Z".into());
        assert_eq!(pin_tag(&image).as_deref(), Some("20261102-030405"));
        image.labels.insert(labels::OCI_CREATED.into(), "2026-11-01T12:00:00+02:00".into());
        assert_eq!(pin_tag(&image).as_deref(), Some("20261101-100000"));
        image.labels.insert(labels::OCI_CREATED.into(), "yesterday".into());
        assert_eq!(pin_tag(&image), None);
    }

    #[test]
    fn recognises_pins() {
        assert!(is_pin("20261101-100000"));
        assert!(!is_pin("latest") && !is_pin("2026110-1000000") && !is_pin("20261101x100000"));
        let image = ImageInfo {
            repo_tags: vec![
                "r:latest".into(),
                "r:20261101-100000".into(),
                "r:20261102-100000".into(),
                "other:20261103-100000".into(),
            ],
            ..Default::default()
        };
        assert_eq!(pins_in(&image, "r"), ["20261102-100000", "20261101-100000"]);
    }
}
