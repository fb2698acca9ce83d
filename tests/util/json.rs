//! Reading JSON answers in assertions.

use serde_json::Value;

/// The keys of object `value`, in order; panics when it is not an object.
pub fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// Field `key` of every element of array `value`, as strings (`ids(list, "id")`); panics
/// when it is not an array of objects with that string field.
pub fn strings<'a>(value: &'a Value, key: &str) -> Vec<&'a str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|element| {
            element[key]
                .as_str()
                .unwrap_or_else(|| panic!("no string {key} in {element}"))
        })
        .collect()
}
