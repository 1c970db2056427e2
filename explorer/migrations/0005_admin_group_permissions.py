from __future__ import annotations

from django.db import migrations

ADMIN_PERMISSIONS = [
    ("auth", "user", ("add", "change", "delete", "view")),
    ("auth", "group", ("view",)),
    ("explorer", "session", ("view", "delete")),
    ("explorer", "entry", ("view",)),
    ("explorer", "importproblem", ("view",)),
]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations; make sure they exist now.
    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    admin = Group.objects.get_or_create(name="admin")[0]
    for app_label, model, actions in ADMIN_PERMISSIONS:
        for action in actions:
            perm = Permission.objects.filter(
                content_type__app_label=app_label, codename=f"{action}_{model}"
            ).first()
            if perm is not None:
                admin.permissions.add(perm)


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0004_leaner_entry_indexes"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
