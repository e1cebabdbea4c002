//! The documents of a manifest file: YAML (`---`-separated) or JSON (concatenated objects),
//! flattened through `kind: List`, and the Deployments among them as typed objects.

use k8s_openapi::api::apps::v1::Deployment;
use serde::Deserialize as _;
use serde_json::Value;

use super::manifest::ManifestError;

/// Every Deployment of `text`, in file order; at least one.
pub(super) fn deployments(text: &str) -> Result<Vec<Deployment>, ManifestError> {
    let mut objects = Vec::new();
    for (i, document) in documents(text)?.into_iter().enumerate() {
        flatten(i + 1, document, &mut objects)?;
    }
    let mut found = Vec::new();
    let mut other_kinds = Vec::new();
    for object in objects {
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != "Deployment" {
            other_kinds.push(kind.to_string());
            continue;
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let deployment: Deployment =
            serde_json::from_value(object).map_err(|e| ManifestError::Schema {
                name,
                reason: e.to_string(),
            })?;
        found.push(deployment);
    }
    if found.is_empty() {
        let found = if other_kinds.is_empty() {
            String::from("nothing")
        } else {
            other_kinds.join(", ")
        };
        return Err(ManifestError::NoDeployment { found });
    }
    Ok(found)
}

/// The non-empty documents as JSON values.
fn documents(text: &str) -> Result<Vec<Value>, ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    if text.trim_start().starts_with(['{', '[']) {
        let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        for (i, document) in stream.enumerate() {
            out.push(document.map_err(|e| ManifestError::Syntax {
                index: i + 1,
                reason: e.to_string(),
            })?);
        }
    } else {
        for (i, document) in serde_norway::Deserializer::from_str(text).enumerate() {
            let value = Value::deserialize(document).map_err(|e| ManifestError::Syntax {
                index: i + 1,
                reason: e.to_string(),
            })?;
            out.push(value);
        }
    }
    // An empty document (a trailing `---`, comments only) is nothing, not an error.
    out.retain(|v| !v.is_null());
    Ok(out)
}

/// Adds `document` to `objects`, or its `items` when it is a `kind: List` (or `FooList`).
fn flatten(index: usize, document: Value, objects: &mut Vec<Value>) -> Result<(), ManifestError> {
    let Value::Object(mut map) = document else {
        return Err(ManifestError::NotAnObject { index });
    };
    let is_list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    if is_list {
        if let Some(Value::Array(items)) = map.remove("items") {
            for item in items {
                flatten(index, item, objects)?;
            }
            return Ok(());
        }
    }
    if !map.get("kind").is_some_and(Value::is_string) {
        return Err(ManifestError::NotAnObject { index });
    }
    objects.push(Value::Object(map));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_json_and_lists() {
        let yaml = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n\
                    apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n---\n";
        let found = deployments(yaml).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].metadata.name.as_deref(), Some("a"));
        let json = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"}},
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"c"}}]}
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}"#;
        let names: Vec<_> = deployments(json)
            .unwrap()
            .into_iter()
            .map(|d| d.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["b", "c", "d"]);
    }

    #[test]
    fn unusable_documents_are_errors() {
        assert_eq!(
            deployments("kind: Service\n").unwrap_err(),
            ManifestError::NoDeployment {
                found: String::from("Service")
            }
        );
        assert_eq!(
            deployments("").unwrap_err(),
            ManifestError::NoDeployment {
                found: String::from("nothing")
            }
        );
        assert!(matches!(
            deployments("- a\n- b\n"),
            Err(ManifestError::NotAnObject { index: 1 })
        ));
        assert!(matches!(
            deployments("a: [\n"),
            Err(ManifestError::Syntax { index: 1, .. })
        ));
        assert!(matches!(
            deployments("kind: Deployment\nspec: 3\n"),
            Err(ManifestError::Schema { .. })
        ));
    }
}
