//! The Lead's fields as the interface names them (SPEC.md 2.1): one list for validation,
//! the mapping targets and subscription filters.

/// The Lead's text fields by their interface names (SPEC.md 2.1), in the order buyers get
/// them: what subscription filters may name besides `fieldValues.NAME`.
pub const FIELD_NAMES: [&str; 19] = [
    "externalId",
    "firstName",
    "lastName",
    "email",
    "phone",
    "street",
    "houseNumber",
    "postalCode",
    "city",
    "country",
    "consentStatus",
    "legalBasis",
    "consentCapturedAt",
    "consentTextVersion",
    "capturedByExternalId",
    "capturedByName",
    "capturedByTeam",
    "capturedAt",
    "captureMethod",
];
