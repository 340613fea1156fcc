"""forget"""
