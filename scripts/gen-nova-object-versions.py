#!/usr/bin/python3
"""Writes agent/nova/data/object-versions.json: the version of every NovaObject class nova registers,
per release, read from nova's source at the release's tag.

    python3 scripts/gen-nova-object-versions.py NOVA_GIT_DIR > agent/nova/data/object-versions.json

NOVA_GIT_DIR is a clone (bare is fine) of openstack/nova with the release tags. Nothing is
imported: each nova/objects/*.py at the tag is parsed, and every class decorated with
NovaObjectRegistry.register gets its VERSION, or the VERSION of the nearest base class that has
one (QuotasNoOp has none of its own). Classes behind register_if(False) are not registered by
nova and are left out, as the registry leaves them out.

This is the `object_versions` manifest nova-compute of that release sends with
`object_class_action_versions`; the conductor answers with objects at these versions.
"""
import ast
import json
import subprocess
import sys

# Release name -> nova tag (the Debian package each release is tested against).
RELEASES = {
    'zed': '26.2.2',
    '2025.1': '31.0.0',
}


def git(repo, *args):
    return subprocess.run(['git', '-C', repo, *args], check=True, capture_output=True, text=True).stdout


def decorator_name(node):
    """'register' for @base.NovaObjectRegistry.register, 'register_if' for ...register_if(x)."""
    call = node.func if isinstance(node, ast.Call) else node
    if isinstance(call, ast.Attribute) and isinstance(call.value, (ast.Attribute, ast.Name)):
        owner = call.value.attr if isinstance(call.value, ast.Attribute) else call.value.id
        if owner == 'NovaObjectRegistry':
            return call.attr, node
    return None, node


def registered(cls):
    for dec in cls.decorator_list:
        name, node = decorator_name(dec)
        if name == 'register':
            return True
        if name == 'register_if':
            arg = node.args[0] if node.args else None
            return isinstance(arg, ast.Constant) and bool(arg.value)
    return False


def own_version(cls):
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == 'VERSION' for t in stmt.targets):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return stmt.value.value
    return None


def base_names(cls):
    for b in cls.bases:
        if isinstance(b, ast.Name):
            yield b.id
        elif isinstance(b, ast.Attribute):
            yield b.attr


def manifest(repo, tag):
    files = [p for p in git(repo, 'ls-tree', '--name-only', f'{tag}:nova/objects/').split() if p.endswith('.py')]
    classes = {}
    for name in files:
        tree = ast.parse(git(repo, 'show', f'{tag}:nova/objects/{name}'))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node

    def version_of(cls, seen=()):
        v = own_version(cls)
        if v is not None:
            return v
        for b in base_names(cls):
            if b in classes and b not in seen:
                v = version_of(classes[b], seen + (b,))
                if v is not None:
                    return v
        return None

    out = {}
    for cname, cls in classes.items():
        if not registered(cls):
            continue
        v = version_of(cls)
        if v is None:
            sys.exit(f'{tag}: {cname} is registered but has no VERSION')
        out[cname] = v
    return dict(sorted(out.items()))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    repo = sys.argv[1]
    data = {release: {'nova': tag, 'objects': manifest(repo, tag)} for release, tag in RELEASES.items()}
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
