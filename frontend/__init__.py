"""The dashboard: login, a cluster view for admins and a tenant view for members, JSON endpoints."""
