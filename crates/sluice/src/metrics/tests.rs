use super::*;

#[test]
fn label_texts_spell_their_codes() {
    for (c, t) in CODES {
        assert_eq!(c.to_string(), *t);
        assert_eq!(code_label(*c), *t);
    }
    for (s, t) in STATUSES {
        assert_eq!(s.to_string(), *t);
        assert_eq!(status_label(*s), *t);
    }
    assert_eq!(code_label(-1), "other");
    assert_eq!(status_label(418), "other");
}
